// Package spoolwatch counts every message moved into a mail spool, by file
// name, as it happens (inotify). The spool replaces a message sent again
// under its Message-ID, so the files alone cannot show a second sending; the
// moves into the directory can. The soak and the partition tests use it.
package spoolwatch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Watch counts the messages moved into one spool directory.
type Watch struct {
	f    *os.File // the inotify descriptor, non-blocking, so Close ends a Read
	done chan struct{}

	mu         sync.Mutex
	deliveries map[string]int // file name → times moved in
	overflow   bool
	err        error
}

// Start creates dir and starts counting what is moved into it.
func Start(dir string) (*Watch, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_MOVED_TO); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("inotify watch %s: %w", dir, err)
	}
	w := &Watch{f: os.NewFile(uintptr(fd), "inotify"), done: make(chan struct{}), deliveries: map[string]int{}}
	go w.read()
	return w, nil
}

func (w *Watch) read() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
			}
			return
		}
		w.mu.Lock()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				w.overflow = true
			}
			if s := string(bytes.TrimRight(name, "\x00")); strings.HasSuffix(s, ".eml") {
				w.deliveries[s]++
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
		w.mu.Unlock()
	}
}

// Counts returns the deliveries so far by file name, and an error if some
// may have been missed.
func (w *Watch) Counts() (map[string]int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.deliveries))
	for k, v := range w.deliveries {
		out[k] = v
	}
	switch {
	case w.overflow:
		return out, errors.New("the spool's inotify queue overflowed: deliveries were missed")
	case w.err != nil:
		return out, fmt.Errorf("watching the spool: %w", w.err)
	}
	return out, nil
}

// Close stops counting.
func (w *Watch) Close() {
	if w == nil {
		return
	}
	w.f.Close()
	<-w.done
}
