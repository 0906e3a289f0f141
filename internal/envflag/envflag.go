// Package envflag lets every command-line flag also be set from the
// environment, as PREFIX + the flag name in upper snake case
// (--http-addr → TRIGGERD_HTTP_ADDR). A flag given on the command line wins
// over the environment.
package envflag

import (
	"flag"
	"fmt"
	"strings"
)

// Name returns the environment variable that sets flag name under prefix.
func Name(prefix, name string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Parse parses args into fs, then sets every flag not given on the command
// line from its environment variable, read through lookup (os.LookupEnv in
// production). A value the flag rejects is an error naming the variable.
//
// Flags may come before, between or after positional arguments ("run ID
// --account X" and "--account X run ID" are the same); an argument "--"
// ends the flags, and everything after it is positional. fs.Args() returns
// the positional arguments in their order.
func Parse(fs *flag.FlagSet, args []string, prefix string, lookup func(string) (string, bool)) error {
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
	// Leave exactly the positional arguments in fs.Args().
	if err := fs.Parse(append([]string{"--"}, append(positional, tail...)...)); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || given[f.Name] {
			return
		}
		env := Name(prefix, f.Name)
		if v, ok := lookup(env); ok {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("environment variable %s=%q: %w", env, v, serr)
			}
		}
	})
	return err
}

// Usage returns a usage function for fs that lists each flag with its
// environment variable.
func Usage(fs *flag.FlagSet, prefix, synopsis string) func() {
	return func() {
		w := fs.Output()
		fmt.Fprintln(w, synopsis)
		fs.VisitAll(func(f *flag.Flag) {
			fmt.Fprintf(w, "  --%s (env %s, default %q)\n    \t%s\n", f.Name, Name(prefix, f.Name), f.DefValue, f.Usage)
		})
	}
}
