package accounts

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrUndecryptable is returned by Vault.Open for sealed data it cannot
// open: sealed under a key the vault does not hold, under another AAD
// (for instance a token moved to another account), truncated or tampered
// with. The error never carries the data.
var ErrUndecryptable = errors.New("accounts: sealed data cannot be decrypted")

// Sealed format, all in one byte slice:
//
//	version (1 byte, sealVersion) | key id (4 bytes) | nonce (12 bytes) | ciphertext+tag
//
// The key id is the first 4 bytes of SHA-256 of the key, so Open knows
// which key to use after a rotation. The version byte and key id are
// authenticated too: the GCM additional data is header || aad.
const (
	sealVersion       byte = 1
	keySize                = 32
	keyIDSize              = 4
	nonceSize              = 12
	headerSize             = 1 + keyIDSize + nonceSize
	maxKeys                = 2
	envKeySource           = "environment TRIGGERD_ENCRYPTION_KEY"
	generatedKeyFile       = "encryption_key"
	keyFilePerm            = 0o600
	keyDirPerm             = 0o700
	keyFileReadLimit       = 4096
	maxSealPlainBytes      = 1 << 20
)

type keyID [keyIDSize]byte

// Vault seals and opens small secrets (OAuth tokens, PKCE verifiers) with
// AES-256-GCM. The first key seals; every key opens, so keys can be
// rotated by putting the new key first and keeping the old one second
// until everything has been sealed again. A Vault is safe for concurrent
// use.
type Vault struct {
	primary keyID
	aeads   map[keyID]cipher.AEAD
}

// NewVault returns a vault for keys, each exactly 32 bytes. The first key
// seals new data; all of them open existing data.
func NewVault(keys ...[]byte) (*Vault, error) {
	if len(keys) == 0 {
		return nil, errors.New("accounts: new vault: no encryption key given")
	}
	v := &Vault{aeads: make(map[keyID]cipher.AEAD, len(keys))}
	seen := make(map[keyID][]byte, len(keys))
	for i, k := range keys {
		if len(k) != keySize {
			return nil, fmt.Errorf("accounts: new vault: key %d is %d bytes, want exactly %d (AES-256)", i+1, len(k), keySize)
		}
		id := idOf(k)
		if prev, ok := seen[id]; ok {
			if bytes.Equal(prev, k) {
				continue // the same key twice is harmless
			}
			return nil, fmt.Errorf("accounts: new vault: keys %x collide on their key id; generate another key", id[:])
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("accounts: new vault: key %d: %w", i+1, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("accounts: new vault: key %d: %w", i+1, err)
		}
		seen[id] = bytes.Clone(k)
		v.aeads[id] = aead
		if i == 0 {
			v.primary = id
		}
	}
	return v, nil
}

func idOf(key []byte) keyID {
	sum := sha256.Sum256(key)
	var id keyID
	copy(id[:], sum[:keyIDSize])
	return id
}

// Seal encrypts plaintext bound to aad (for example "account:" + account
// id): Open succeeds only with the same aad.
func (v *Vault) Seal(plaintext []byte, aad string) ([]byte, error) {
	if len(plaintext) > maxSealPlainBytes {
		return nil, fmt.Errorf("accounts: seal: %d bytes is more than the %d allowed", len(plaintext), maxSealPlainBytes)
	}
	aead := v.aeads[v.primary]
	out := make([]byte, headerSize, headerSize+len(plaintext)+aead.Overhead())
	out[0] = sealVersion
	copy(out[1:1+keyIDSize], v.primary[:])
	if _, err := rand.Read(out[1+keyIDSize : headerSize]); err != nil {
		return nil, fmt.Errorf("accounts: seal: read random nonce: %w", err)
	}
	nonce := out[1+keyIDSize : headerSize]
	return aead.Seal(out, nonce, plaintext, additionalData(out[:1+keyIDSize], aad)), nil
}

// Open decrypts data made by Seal with the same aad. Any failure (unknown
// format version or key id, wrong aad, tampering) is ErrUndecryptable.
func (v *Vault) Open(sealed []byte, aad string) ([]byte, error) {
	if len(sealed) < headerSize+16 {
		return nil, fmt.Errorf("%w: too short", ErrUndecryptable)
	}
	if sealed[0] != sealVersion {
		return nil, fmt.Errorf("%w: unknown format version %d", ErrUndecryptable, sealed[0])
	}
	var id keyID
	copy(id[:], sealed[1:1+keyIDSize])
	aead, ok := v.aeads[id]
	if !ok {
		return nil, fmt.Errorf("%w: sealed under unknown key id %x", ErrUndecryptable, id[:])
	}
	nonce := sealed[1+keyIDSize : headerSize]
	plain, err := aead.Open(nil, nonce, sealed[headerSize:], additionalData(sealed[:1+keyIDSize], aad))
	if err != nil {
		return nil, fmt.Errorf("%w: authentication failed (wrong context, wrong key or tampered)", ErrUndecryptable)
	}
	return plain, nil
}

func additionalData(header []byte, aad string) []byte {
	ad := make([]byte, 0, len(header)+len(aad))
	ad = append(ad, header...)
	return append(ad, aad...)
}

// LoadKeys finds the encryption keys. envValue is the value of
// TRIGGERD_ENCRYPTION_KEY: one key, or two separated by a comma (the first
// seals, both open), each 32 bytes written as base64 (standard or URL
// alphabet, padded or not) or as 64 hex characters. When envValue is empty,
// keyFile is read in the same format. When both are empty, the key in
// <dataDir>/encryption_key is used, generated from crypto/rand on the first
// start (mode 0600, directory 0700). source names where the keys came from
// (a path, or "environment TRIGGERD_ENCRYPTION_KEY") and never holds a key;
// neither do the errors.
func LoadKeys(envValue, keyFile, dataDir string) (keys [][]byte, source string, err error) {
	if strings.TrimSpace(envValue) != "" {
		keys, err := parseKeys(envValue, envKeySource)
		return keys, envKeySource, err
	}
	if keyFile != "" {
		content, err := readKeyFile(keyFile)
		if err != nil {
			return nil, keyFile, err
		}
		keys, err := parseKeys(string(content), keyFile)
		return keys, keyFile, err
	}
	if dataDir == "" {
		return nil, "", errors.New("accounts: load keys: no encryption key: set TRIGGERD_ENCRYPTION_KEY, a key file or a data dir")
	}
	path := filepath.Join(dataDir, generatedKeyFile)
	keys, err = loadOrGenerate(path)
	return keys, path, err
}

func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("accounts: load keys: %w", err)
	}
	defer f.Close()
	content, err := io.ReadAll(io.LimitReader(f, keyFileReadLimit+1))
	if err != nil {
		return nil, fmt.Errorf("accounts: load keys: read %s: %w", path, err)
	}
	if len(content) > keyFileReadLimit {
		return nil, fmt.Errorf("accounts: load keys: %s is larger than %d bytes; it is not a key file", path, keyFileReadLimit)
	}
	return content, nil
}

func loadOrGenerate(path string) ([][]byte, error) {
	if err := os.MkdirAll(filepath.Dir(path), keyDirPerm); err != nil {
		return nil, fmt.Errorf("accounts: load keys: create data dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, keyFilePerm)
	if errors.Is(err, fs.ErrExist) {
		content, err := readKeyFile(path)
		if err != nil {
			return nil, err
		}
		return parseKeys(string(content), path)
	}
	if err != nil {
		return nil, fmt.Errorf("accounts: load keys: create %s: %w", path, err)
	}
	key := make([]byte, keySize)
	if _, err := rand.Read(key); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("accounts: load keys: generate key: %w", err)
	}
	_, werr := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		// A half-written key file would stop every later start; remove it.
		os.Remove(path)
		return nil, fmt.Errorf("accounts: load keys: write %s: %w", path, werr)
	}
	return [][]byte{key}, nil
}

// parseKeys reads one or two comma-separated keys (newlines also separate,
// for key files). Errors name the source and the key's position, never its
// value.
func parseKeys(s, source string) ([][]byte, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' })
	var keys [][]byte
	for _, f := range fields {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if len(keys) == maxKeys {
			return nil, fmt.Errorf("accounts: load keys: %s holds more than %d keys (the new one first, the old one second)", source, maxKeys)
		}
		k, ok := decodeKey(f)
		if !ok {
			return nil, fmt.Errorf("accounts: load keys: key %d in %s is not 32 bytes written as base64 or 64 hex characters", len(keys)+1, source)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("accounts: load keys: %s holds no key", source)
	}
	return keys, nil
}

func decodeKey(s string) ([]byte, bool) {
	if len(s) == 2*keySize {
		if k, err := hex.DecodeString(s); err == nil {
			return k, true
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil && len(k) == keySize {
			return k, true
		}
	}
	return nil, false
}
