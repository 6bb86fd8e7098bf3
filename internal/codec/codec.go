// Package codec encrypts Temporal payloads with AES-256-GCM so claim data
// (claimant names, e-mail addresses, Stripe accounts, amounts) never reaches
// the Temporal server, its database or its visibility store in clear text.
//
// Encode serializes each payload whole (metadata included) and seals it with
// the key ring's active key; the result carries
//
//	encoding:          binary/encrypted
//	encryption-key-id: <key ID>
//
// and data = 12-byte random nonce || ciphertext, with the key ID as the GCM
// additional data so a payload cannot be relabelled to another key. Decode
// opens payloads with whichever key of the ring their metadata names and
// passes payloads that are not encrypted through unchanged, so histories
// written before encryption was turned on still decode.
package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// Payload metadata the codec writes and reads.
const (
	// MetadataEncodingEncrypted is the "encoding" of an encrypted payload.
	MetadataEncodingEncrypted = "binary/encrypted"
	// MetadataEncryptionKeyID names the key an encrypted payload was sealed with.
	MetadataEncryptionKeyID = "encryption-key-id"
)

// Errors Decode wraps, for errors.Is.
var (
	// ErrUnknownKey: the payload names a key that is not in the key ring.
	ErrUnknownKey = errors.New("encryption key not in the key ring")
	// ErrDecrypt: authentication failed (tampered data or metadata, or a
	// payload relabelled to another key).
	ErrDecrypt = errors.New("payload failed authentication")
	// ErrMalformed: an encrypted payload without a key ID or too short to
	// hold a nonce and tag.
	ErrMalformed = errors.New("malformed encrypted payload")
)

// Codec is the AES-256-GCM converter.PayloadCodec. It is immutable and safe
// for concurrent use.
type Codec struct {
	active string
	aeads  map[string]cipher.AEAD
	ids    string // "a, b" for error messages
}

var _ converter.PayloadCodec = (*Codec)(nil)

// New builds the codec from a validated copy of the key ring.
func New(kr *Keyring) (*Codec, error) {
	if kr == nil {
		return nil, errors.New("codec: nil key ring")
	}
	if err := kr.Validate(); err != nil {
		return nil, err
	}
	c := &Codec{active: kr.Active, aeads: make(map[string]cipher.AEAD, len(kr.Keys)), ids: strings.Join(kr.IDs(), ", ")}
	for id, key := range kr.Keys {
		block, err := aes.NewCipher(key) // copies the key
		if err != nil {
			return nil, fmt.Errorf("codec: key %q: AES setup failed", id)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("codec: key %q: GCM setup failed", id)
		}
		c.aeads[id] = aead
	}
	return c, nil
}

// NewCodec returns the codec for the key ring. An invalid key ring (which
// LoadFromEnv never returns) yields a codec whose every Encode and Decode
// fails with the validation error, rather than a panic or a codec that
// silently stores clear text. Use New to get the error up front.
func NewCodec(kr *Keyring) converter.PayloadCodec {
	c, err := New(kr)
	if err != nil {
		return failingCodec{err}
	}
	return c
}

// DataConverter is the SDK's default data converter with payloads
// encrypted by the key ring's codec.
func DataConverter(kr *Keyring) converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), NewCodec(kr))
}

// ActiveKeyID is the ID of the key Encode uses.
func (c *Codec) ActiveKeyID() string { return c.active }

// Encode encrypts every payload with the active key.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	aead := c.aeads[c.active]
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if p == nil {
			continue
		}
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("codec: encode payload %d: serialize: %w", i, err)
		}
		nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
		if _, err := rand.Read(nonce); err != nil {
			return nil, fmt.Errorf("codec: encode payload %d: random nonce: %w", i, err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(MetadataEncodingEncrypted),
				MetadataEncryptionKeyID:    []byte(c.active),
			},
			Data: aead.Seal(nonce, nonce, plain, []byte(c.active)),
		}
	}
	return out, nil
}

// Decode decrypts the encrypted payloads with the key each names and passes
// the others through unchanged.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if p == nil || string(p.GetMetadata()[converter.MetadataEncoding]) != MetadataEncodingEncrypted {
			out[i] = p
			continue
		}
		d, err := c.decodeOne(p)
		if err != nil {
			return nil, fmt.Errorf("codec: decode payload %d: %w", i, err)
		}
		out[i] = d
	}
	return out, nil
}

func (c *Codec) decodeOne(p *commonpb.Payload) (*commonpb.Payload, error) {
	rawID, ok := p.GetMetadata()[MetadataEncryptionKeyID]
	if !ok || len(rawID) == 0 {
		return nil, fmt.Errorf("%w: no %s metadata", ErrMalformed, MetadataEncryptionKeyID)
	}
	id := string(rawID)
	aead, ok := c.aeads[id]
	if !ok {
		shown := id
		if len(shown) > maxKeyIDLen {
			shown = shown[:maxKeyIDLen] + "…"
		}
		return nil, fmt.Errorf("key %q: %w (the ring has %s); add that key to the key ring to read this payload", shown, ErrUnknownKey, c.ids)
	}
	data := p.GetData()
	if len(data) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("key %q: %w: %d bytes is too short for a nonce and tag", id, ErrMalformed, len(data))
	}
	nonce, sealed := data[:aead.NonceSize()], data[aead.NonceSize():]
	plain, err := aead.Open(nil, nonce, sealed, rawID)
	if err != nil {
		return nil, fmt.Errorf("key %q: %w: the data or its key ID was altered, or it was not encrypted with this key", id, ErrDecrypt)
	}
	var d commonpb.Payload
	if err := proto.Unmarshal(plain, &d); err != nil {
		return nil, fmt.Errorf("key %q: decrypted data is not a payload: %w", id, err)
	}
	return &d, nil
}

// failingCodec stands in for a codec built from an invalid key ring.
type failingCodec struct{ err error }

func (f failingCodec) Encode([]*commonpb.Payload) ([]*commonpb.Payload, error) { return nil, f.err }
func (f failingCodec) Decode([]*commonpb.Payload) ([]*commonpb.Payload, error) { return nil, f.err }
