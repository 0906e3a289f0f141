package daemon

import (
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/ingest"
)

// secretReloadInterval is how often the webhook secret files are read
// again for a change. A secret mounted from a Kubernetes Secret or
// rewritten by a secrets manager changes under a running process; SIGHUP
// reads the files at once.
const secretReloadInterval = 10 * time.Second

// secretFile is a webhook secret file named by a flag, and the verifier
// that takes its secrets.
type secretFile struct {
	flag, path string
	v          *ingest.Verifier
	secrets    []string // as last loaded
	problem    string   // the last problem reported, so it is not repeated
}

// watchSecrets reads files again every interval and on SIGHUP, and rotates
// each verifier to its file's secrets when they change, until the
// returned stop is called (once or more). A file that cannot be read or holds no secret
// leaves the secrets as they are, with a warning. With no files, SIGHUP
// is logged and ignored: operators and `systemctl reload` send it to ask
// for a reload, and its default effect would end the process at once,
// with no drain of requests or steps in hand.
func watchSecrets(files []*secretFile, interval time.Duration, log zerolog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var tick <-chan time.Time // none without files
		if len(files) > 0 {
			t := time.NewTicker(interval)
			defer t.Stop()
			tick = t.C
		}
		for {
			select {
			case <-quit:
				return
			case <-hup:
				if len(files) == 0 {
					log.Info().Msg("SIGHUP: no webhook secret file to read again (--codehost-webhook-secret-file, --deploy-webhook-secret-file); ignored")
					continue
				}
				log.Info().Msg("SIGHUP: reading the webhook secret files again")
			case <-tick:
			}
			for _, f := range files {
				f.reload(log)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(hup)
			close(quit)
			<-done
		})
	}
}

// reload reads f's file and rotates f's verifier to its secrets if they
// changed. The log says which file and how many secrets, never a secret.
func (f *secretFile) reload(log zerolog.Logger) {
	secrets, err := readSecretFile(f.flag, f.path)
	switch {
	case err != nil:
	case slices.Equal(secrets, f.secrets):
		f.problem = ""
		return
	default:
		err = f.v.Rotate(secrets...)
	}
	if err != nil {
		f.report(log, err.Error()+"; keeping the secrets loaded before")
		return
	}
	f.problem, f.secrets = "", secrets
	log.Info().Str("flag", "--"+f.flag).Str("file", f.path).Int("secrets", len(secrets)).
		Msg("webhook secrets reloaded: deliveries signed with a secret no longer in the file are refused from now on")
}

func (f *secretFile) report(log zerolog.Logger, problem string) {
	if problem == f.problem {
		return
	}
	f.problem = problem
	log.Warn().Str("flag", "--"+f.flag).Str("file", f.path).Msg(problem)
}
