package main

import (
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/triggerd/triggerd/daemon"
	"github.com/triggerd/triggerd/internal/envflag"
	"github.com/triggerd/triggerd/store/redisstore"
)

// composeService is what TestComposeFileMatchesFlags reads of a service.
type composeService struct {
	Build       any               `yaml:"build"`
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
}

// composeVar matches a variable the file takes from the shell:
// ${NAME:?message} or ${NAME:-default}.
var composeVar = regexp.MustCompile(`\$\{([A-Z_]+)(:[?-][^}]*)?\}`)

// No Docker engine runs here, so docker-compose.yml is checked against
// triggerd's flags instead: every TRIGGERD_ variable of a triggerd service
// is a flag's or a secret's, the values parse as triggerd parses them, and
// the topology the file promises (three routed NATS servers, Redis with a
// replica and three sentinels, two triggerd processes pointing at all of
// them) is the one it describes.
func TestComposeFileMatchesFlags(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	byPrefix := func(prefix string) []string {
		var names []string
		for name := range file.Services {
			if strings.HasPrefix(name, prefix) {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return names
	}
	nats, sentinels := byPrefix("nats-"), byPrefix("sentinel-")
	if len(nats) != 3 || len(sentinels) != 3 {
		t.Fatalf("services nats-* %v and sentinel-* %v; want three of each", nats, sentinels)
	}

	// The NATS cluster: each server named after its service, with
	// JetStream, routed to all three.
	var routes, clientURLs []string
	for _, n := range nats {
		routes = append(routes, "nats://"+n+":6222")
		clientURLs = append(clientURLs, "nats://"+n+":4222")
	}
	for _, n := range nats {
		cmd := file.Services[n].Command
		if !slices.Contains(cmd, "-js") || flagValue(cmd, "--name") != n || flagValue(cmd, "--routes") != strings.Join(routes, ",") ||
			flagValue(cmd, "--cluster_name") == "" {
			t.Errorf("service %s: command %q; want -js, --name %s, a --cluster_name and --routes %s", n, cmd, n, strings.Join(routes, ","))
		}
	}
	// Redis: a master and a replica of it, watched by every sentinel.
	if flagValue(file.Services["redis-replica"].Command, "--replicaof") != "redis" {
		t.Errorf("redis-replica: command %q; want --replicaof redis 6379", file.Services["redis-replica"].Command)
	}
	for _, s := range sentinels {
		if script := strings.Join(file.Services[s].Command, " "); !strings.Contains(script, "sentinel monitor mymaster redis 6379 2") ||
			!strings.Contains(script, "--sentinel") {
			t.Errorf("service %s does not run a sentinel monitoring mymaster at redis:6379 with a quorum of 2: %q", s, script)
		}
	}

	// The triggerd processes.
	secrets := []string{daemon.CodeHostSecret.Env, daemon.DeploySecret.Env, daemon.AdminKey.Env, daemon.NATSPassword.Env, "TRIGGERD_ENCRYPTION_KEY"}
	var c daemon.Config
	fs, _ := newFlagSet(&c, envflag.Env{Prefix: envPrefix})
	processes := 0
	for name, svc := range file.Services {
		if svc.Build == nil {
			continue
		}
		processes++
		env := map[string]string{}
		for k, v := range svc.Environment {
			flagName := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, envPrefix), "_", "-"))
			if !strings.HasPrefix(k, envPrefix) || fs.Lookup(flagName) == nil && !slices.Contains(secrets, k) {
				t.Errorf("service %s sets %s, which is no triggerd flag's variable nor a secret's", name, k)
			}
			// What the shell would give: a value for each ${...}.
			env[k] = composeVar.ReplaceAllStringFunc(v, func(string) string { return "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMyYg==" })
		}
		cfg, err := parseConfig(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard)
		if err != nil {
			t.Errorf("service %s: triggerd refuses its environment: %v", name, err)
			continue
		}
		if cfg.NATSURL != strings.Join(clientURLs, ",") {
			t.Errorf("service %s: TRIGGERD_NATS_URL %q; want every NATS server, %q", name, cfg.NATSURL, strings.Join(clientURLs, ","))
		}
		if cfg.NATSReplicas != 3 {
			t.Errorf("service %s: --nats-replicas %d on a cluster of three; want 3", name, cfg.NATSReplicas)
		}
		if !redisstore.IsSentinelURL(cfg.RedisURL) {
			t.Errorf("service %s: TRIGGERD_REDIS_URL %q is not a Sentinel URL", name, cfg.RedisURL)
		}
		for _, s := range sentinels {
			if !strings.Contains(cfg.RedisURL, s+":26379") {
				t.Errorf("service %s: TRIGGERD_REDIS_URL %q does not name %s", name, cfg.RedisURL, s)
			}
		}
		if env["TRIGGERD_ENCRYPTION_KEY"] == "" {
			t.Errorf("service %s: no TRIGGERD_ENCRYPTION_KEY: processes sharing a store must share the key", name)
		}
	}
	if processes != 2 {
		t.Errorf("%d triggerd services (with build:); want 2", processes)
	}
}

// flagValue returns the argument after flag in cmd, or "".
func flagValue(cmd []string, flag string) string {
	i := slices.Index(cmd, flag)
	if i < 0 || i+1 >= len(cmd) {
		return ""
	}
	return cmd[i+1]
}
