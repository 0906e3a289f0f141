// Package envflag lets command-line flags also be set from the environment,
// as PREFIX + the flag name in upper snake case (--http-addr →
// TRIGGERD_HTTP_ADDR). A flag given on the command line wins over the
// environment.
//
// A variable set to the empty string counts as unset. Compose files and CI
// pass empty variables through, and an empty value would otherwise replace
// a working default with nothing (an empty --http-addr listens on a random
// port of every interface). To give a flag an empty value, give it on the
// command line.
//
// A value a flag rejects is reported with what the flag wants, from its
// type ("want a duration such as 5s, 2m or 1h30m"), rather than the flag
// package's bare "parse error".
package envflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Name returns the environment variable that sets flag name under prefix.
func Name(prefix, name string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Env says which flags of a flag set read the environment, and under what
// names.
type Env struct {
	// Prefix goes before the flag's name in upper snake case: TRIGGERD_.
	Prefix string
	// Only lists the flags that read the environment; empty means every
	// flag. A tool whose flags mostly change from one run to the next binds
	// only the settings a user exports once for a shell, so that a variable
	// exported for one run does not silently change every later one.
	// Names the flag set does not define are ignored, so one list can serve
	// several commands.
	Only []string
}

// Var returns the environment variable that sets flag name, and false when
// the flag does not read the environment.
func (e Env) Var(name string) (string, bool) {
	if len(e.Only) > 0 && !slices.Contains(e.Only, name) {
		return "", false
	}
	return Name(e.Prefix, name), true
}

// Sources maps each flag that was given a value to where the value came
// from: the environment variable's name, or "" for the command line.
type Sources map[string]string

// Describe names flag name and where its value came from, for messages:
// "--name (from VAR)", "--name (on the command line)", or "--name" when it
// was not given.
func (s Sources) Describe(name string) string {
	v, given := s[name]
	switch {
	case !given:
		return "--" + name
	case v == "":
		return "--" + name + " (on the command line)"
	}
	return "--" + name + " (from " + v + ")"
}

// Parse parses args into fs, then sets every flag not given on the command
// line from its environment variable (see Var), read through lookup
// (os.LookupEnv in production). It returns where each flag given a value
// came from. A value the flag rejects is an error saying what the flag
// wants, and naming the variable when it came from the environment.
//
// Parse writes nothing to fs's output: on -h or --help it returns
// flag.ErrHelp, and on a command-line error the error, and the caller
// decides how much usage to show (fs.Usage prints the whole list).
//
// Flags may come before, between or after positional arguments ("run ID
// --account X" and "--account X run ID" are the same); an argument "--"
// ends the flags, and everything after it is positional. fs.Args() returns
// the positional arguments in their order.
func (e Env) Parse(fs *flag.FlagSet, args []string, lookup func(string) (string, bool)) (Sources, error) {
	hintAll(fs)
	if err := parseQuietly(fs, args); err != nil {
		return nil, err
	}
	src := Sources{}
	fs.Visit(func(f *flag.Flag) { src[f.Name] = "" })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil {
			return
		}
		if _, given := src[f.Name]; given {
			return
		}
		env, bound := e.Var(f.Name)
		if !bound {
			return
		}
		// An empty variable counts as unset: see the package comment.
		if v, ok := lookup(env); ok && v != "" {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("environment variable %s=%q: %w", env, v, serr)
				return
			}
			src[f.Name] = env
		}
	})
	if err != nil {
		return nil, err
	}
	return src, nil
}

// parseQuietly parses the command line into fs with fs's output and usage
// silenced, restoring both after, so that errors reach only the caller.
func parseQuietly(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	defer func() { fs.SetOutput(out); fs.Usage = usage }()
	return parseInterspersed(fs, args)
}

// parseInterspersed parses args into fs, taking flags wherever they are
// among the positional arguments, and leaves exactly the positional
// arguments in fs.Args().
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var tail []string
	for i, a := range args {
		if a == "--" {
			args, tail = args[:i], args[i+1:]
			break
		}
	}
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	return fs.Parse(append([]string{"--"}, append(positional, tail...)...))
}

// Usage returns a usage function for fs that prints synopsis, then each
// flag with its default and, when it reads one, its environment variable.
func (e Env) Usage(fs *flag.FlagSet, synopsis string) func() {
	return e.UsageGroups(fs, synopsis, nil)
}

// Group is a titled set of flags, for UsageGroups.
type Group struct {
	Title string
	Flags []string
}

// UsageGroups is Usage with the flags listed group by group, in the
// groups' order and each group's own; flags no group names follow under
// "Other flags", so that none is left out.
func (e Env) UsageGroups(fs *flag.FlagSet, synopsis string, groups []Group) func() {
	return func() {
		w := fs.Output()
		fmt.Fprintln(w, synopsis)
		seen := map[string]bool{}
		line := func(f *flag.Flag) {
			seen[f.Name] = true
			dashes := "--"
			if len(f.Name) == 1 {
				dashes = "-" // -o, as people type it
			}
			if env, ok := e.Var(f.Name); ok {
				fmt.Fprintf(w, "  %s%s (env %s, default %q)\n    \t%s\n", dashes, f.Name, env, f.DefValue, f.Usage)
			} else {
				fmt.Fprintf(w, "  %s%s (default %q)\n    \t%s\n", dashes, f.Name, f.DefValue, f.Usage)
			}
		}
		for _, g := range groups {
			fmt.Fprintf(w, "\n%s:\n", g.Title)
			for _, name := range g.Flags {
				if f := fs.Lookup(name); f != nil {
					line(f)
				}
			}
		}
		other := false
		fs.VisitAll(func(f *flag.Flag) {
			if seen[f.Name] {
				return
			}
			if !other && len(groups) > 0 {
				fmt.Fprint(w, "\nOther flags:\n")
			}
			other = true
			line(f)
		})
	}
}

// hintAll wraps every flag's value so that a value it rejects is an error
// saying what it wants.
func hintAll(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		if _, done := f.Value.(*hinted); !done {
			f.Value = &hinted{v: f.Value}
		}
	})
}

// hinted is a flag.Value whose Set errors say what the value should look
// like. It keeps the wrapped value's Get and IsBoolFlag: the flag package
// asks IsBoolFlag to allow --flag without a value.
type hinted struct{ v flag.Value }

// String returns the wrapped value's text ("" for the zero hinted, which
// the flag package may make to compare defaults).
func (h *hinted) String() string {
	if h == nil || h.v == nil {
		return ""
	}
	return h.v.String()
}

// Set sets the wrapped value, replacing the flag package's "parse error"
// with what the flag wants.
func (h *hinted) Set(s string) error {
	err := h.v.Set(s)
	if err == nil {
		return nil
	}
	want := wanted(h.Get())
	switch {
	case want == "":
		return err
	case err.Error() == "parse error":
		return errors.New(want)
	default:
		return fmt.Errorf("%w; %s", err, want)
	}
}

// Get returns the wrapped value's Get, or nil when it has none.
func (h *hinted) Get() any {
	if g, ok := h.v.(flag.Getter); ok {
		return g.Get()
	}
	return nil
}

// IsBoolFlag reports whether the wrapped value is a boolean flag.
func (h *hinted) IsBoolFlag() bool {
	b, ok := h.v.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// wanted describes the values a flag holding v accepts, or "" for types it
// knows nothing about (their own errors say more).
func wanted(v any) string {
	switch v.(type) {
	case time.Duration:
		return "want a duration such as 5s, 2m or 1h30m"
	case int, int64:
		return "want a whole number, such as 100"
	case uint, uint64:
		return "want a whole number of 0 or more, such as 100"
	case bool:
		return "want true or false"
	case float64:
		return "want a number, such as 2.5"
	}
	return ""
}
