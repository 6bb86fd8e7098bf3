package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
)

// A claim file is the claimant's words, and a document path in it could
// name any file the starter can read (/etc/shadow, a key file,
// /proc/self/environ). So the starter reads documents only under a root
// directory (--docs-root, or the claim file's own directory), after
// resolving symbolic links, regular files only, opened without following
// links and without blocking (a FIFO does not hang it), and never more
// than the blob store's size limit.

// openDocument opens the document at path (absolute, or relative to the
// working directory) for reading, if it is a regular file under root.
func openDocument(root, path string) (*os.File, error) {
	rootReal, err := realPath(root)
	if err != nil {
		return nil, fmt.Errorf("the documents root %s: %v", root, err)
	}
	real, err := realPath(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", path, err)
	}
	rel, err := filepath.Rel(rootReal, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return nil, fmt.Errorf("%s is outside the documents root %s (documents are read only under it; see --docs-root)", path, rootReal)
	}
	r, err := os.OpenRoot(rootReal)
	if err != nil {
		return nil, fmt.Errorf("the documents root %s: %v", rootReal, err)
	}
	defer r.Close()
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %v", path, unwrapPath(err))
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("cannot read %s: %v", path, err)
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	case fi.Size() > blobs.DefaultMaxSize:
		f.Close()
		return nil, fmt.Errorf("%s is %d bytes, more than %d", path, fi.Size(), blobs.DefaultMaxSize)
	}
	return f, nil
}

// realPath is path made absolute with every symbolic link resolved.
func realPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", unwrapPath(err)
	}
	return real, nil
}

// unwrapPath drops the path a *PathError repeats: the message names it.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// checkDocuments refuses, before anything starts, documents that are not
// regular files under root, or larger than the blob store takes.
func checkDocuments(c claim.Claim, root string) error {
	var errs claim.ValidationError
	for i, d := range c.Documents {
		if d.URI != "" {
			continue
		}
		f, err := openDocument(root, d.Path)
		if err != nil {
			errs = append(errs, claim.FieldError{Field: fmt.Sprintf("documents[%d].path", i), Reason: err.Error()})
			continue
		}
		f.Close()
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// storeDocuments moves each document into the blob store, reading it the
// way checkDocuments allowed (the size limit is enforced while reading):
// the claim, and so its workflow history, then carries a reference, never
// the content.
func storeDocuments(ctx context.Context, docs *blobs.Store, c *claim.Claim, root string) error {
	for i, d := range c.Documents {
		if d.URI != "" {
			continue
		}
		f, err := openDocument(root, d.Path)
		if err != nil {
			return fmt.Errorf("documents[%d].path: %w", i, err)
		}
		ref, err := docs.Put(ctx, blobs.DocumentKey(c.ID, i, d.Path), f)
		f.Close()
		if err != nil {
			return fmt.Errorf("documents[%d]: %w", i, err)
		}
		c.Documents[i] = claim.Document{Name: d.Name, URI: ref.URI, SHA256: ref.SHA256, Size: ref.Size}
	}
	return nil
}
