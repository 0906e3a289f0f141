package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/ingest"
)

// defaultNATSURL is where triggerd's embedded NATS listens by default.
const defaultNATSURL = "nats://127.0.0.1:4222"

// natsPasswordEnv and natsPasswordFile are where triggerd keeps its
// embedded NATS's operator password (the first of a list is used).
const (
	natsPasswordEnv  = "TRIGGERD_NATS_PASSWORD"
	natsPasswordFile = "nats_password"
)

// natsFlags are the flags of the commands that connect to triggerd's NATS.
type natsFlags struct {
	url     *string
	dataDir *string
}

// addNATSFlags adds --nats-url and --data-dir.
func addNATSFlags(fs *flag.FlagSet) natsFlags {
	return natsFlags{
		url:     fs.String("nats-url", defaultNATSURL, "NATS server triggerd publishes to"),
		dataDir: fs.String("data-dir", "./data", "triggerd's data dir, where it wrote "+natsPasswordFile+" (the embedded NATS's operator password, used when "+natsPasswordEnv+" is unset)"),
	}
}

// connect connects to triggerd's NATS without changing its streams.
func (f natsFlags) connect(ctx context.Context) (*bus.Bus, error) {
	user, pw, source, err := natsCredentials(*f.url, *f.dataDir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, *f.url, bus.Options{Name: "triggerctl", SkipProvision: true, User: user, Password: pw})
	switch {
	case errors.Is(err, nats.ErrAuthorization) && source == "":
		return nil, fmt.Errorf("%w: triggerd's embedded NATS wants its operator password: set %s, or point --data-dir at triggerd's data dir (looked for %s)",
			err, natsPasswordEnv, filepath.Join(*f.dataDir, natsPasswordFile))
	case errors.Is(err, nats.ErrAuthorization):
		return nil, fmt.Errorf("%w: the operator password from %s is not the one this NATS takes (another triggerd's data dir?)", err, source)
	case err != nil:
		return nil, fmt.Errorf("%w (is triggerd running? point --nats-url or TRIGGERD_NATS_URL at its NATS)", err)
	}
	return b, nil
}

// natsCredentials returns the user and password to connect to triggerd's
// NATS at rawURL with, and where the password came from: none when the URL
// carries a user of its own; else the operator's, from natsPasswordEnv or
// <dataDir>/nats_password; none when neither is there (a NATS without
// users). The password never appears in an error.
func natsCredentials(rawURL, dataDir string) (user, pw, source string, err error) {
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		return "", "", "", nil
	}
	if v, ok := os.LookupEnv(natsPasswordEnv); ok && v != "" {
		if list := ingest.SplitSecrets(v); len(list) > 0 {
			return bus.OperatorUser, list[0], natsPasswordEnv, nil
		}
	}
	path := filepath.Join(dataDir, natsPasswordFile)
	list, err := ingest.ReadSecretFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", "", nil
	case errors.Is(err, ingest.ErrNoSecret):
		return "", "", "", fmt.Errorf("%s is empty: triggerd writes its embedded NATS's operator password there; set %s instead", path, natsPasswordEnv)
	case err != nil:
		return "", "", "", fmt.Errorf("read the NATS operator password: %w; fix the file or set %s", err, natsPasswordEnv)
	}
	return bus.OperatorUser, list[0], path, nil
}
