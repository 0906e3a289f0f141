package layering

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/triggerd/triggerd"

// pkg is what `go list -json` says of one package of the module.
type pkg struct {
	ImportPath   string
	Imports      []string
	Deps         []string
	TestImports  []string
	XTestImports []string
}

// rules is rules.txt, read.
type rules struct {
	// project maps a package (module-relative) to the project packages it
	// may import.
	project map[string][]string
	// libs maps an import-path prefix to the packages that may import it.
	libs map[string][]string
	// never holds forbidden transitive dependencies: from -> to.
	never [][2]string
	// testOnly are packages only tests (and the packages listed) import.
	testOnly map[string][]string
}

func readRules(t *testing.T) rules {
	t.Helper()
	f, err := os.Open("rules.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := rules{project: map[string][]string{}, libs: map[string][]string{}, testOnly: map[string][]string{}}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "#"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		fields := strings.Fields(line)
		switch fields[0] {
		case "lib", "testonly":
			head, rest, ok := strings.Cut(strings.Join(fields[1:], " "), ":")
			if !ok {
				t.Fatalf("rules.txt:%d: want %q", n, fields[0]+" PATH: PACKAGES")
			}
			m := r.libs
			if fields[0] == "testonly" {
				m = r.testOnly
			}
			m[strings.TrimSpace(head)] = strings.Fields(rest)
		case "never":
			if len(fields) != 4 || fields[2] != "->" {
				t.Fatalf("rules.txt:%d: want %q", n, "never FROM -> TO")
			}
			r.never = append(r.never, [2]string{fields[1], fields[3]})
		default:
			head, rest, ok := strings.Cut(line, ":")
			if !ok {
				t.Fatalf("rules.txt:%d: want %q", n, "PACKAGE: IMPORTS")
			}
			if _, dup := r.project[head]; dup {
				t.Fatalf("rules.txt:%d: %s listed twice", n, head)
			}
			r.project[strings.TrimSpace(head)] = strings.Fields(rest)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return r
}

// listModule returns every package of the module, keyed by its path
// relative to the module.
func listModule(t *testing.T) map[string]pkg {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH (%v): the import rules are read with go list", err)
	}
	cmd := exec.Command(goTool, "list", "-json", module+"/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs[rel(p.ImportPath)] = p
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages: the test checked nothing", len(pkgs))
	}
	return pkgs
}

// rel returns path relative to the module, or "" outside it.
func rel(path string) string {
	if path == module {
		return "."
	}
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r
	}
	return ""
}

// allowed reports whether who is named by list: exactly, or by a
// "prefix/..." pattern.
func allowed(list []string, who string) bool {
	for _, l := range list {
		if l == who {
			return true
		}
		if p, ok := strings.CutSuffix(l, "/..."); ok && (who == p || strings.HasPrefix(who, p+"/")) {
			return true
		}
	}
	return false
}

// TestImportsFollowTheRules holds the import graph to rules.txt: which
// project packages each package may import, which packages may import
// NATS, echo, Redis, bbolt or net/http, what must never depend on what,
// and that the provider fakes are imported only by the sandbox wiring and
// tests.
func TestImportsFollowTheRules(t *testing.T) {
	r := readRules(t)
	pkgs := listModule(t)
	names := make([]string, 0, len(pkgs))
	for n := range pkgs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		p := pkgs[name]
		may, listed := r.project[name]
		if !listed {
			t.Errorf("package %s has no line in internal/layering/rules.txt: add one naming the project packages it may import (it imports %s)", name, projectImports(p.Imports))
			continue
		}
		for _, imp := range p.Imports {
			if dep := rel(imp); dep != "" {
				if !slices.Contains(may, dep) {
					t.Errorf("%s imports %s, which rules.txt does not allow (its line: %s: %s)", name, dep, name, strings.Join(may, " "))
				}
				continue
			}
			for prefix, who := range r.libs {
				if (imp == prefix || strings.HasPrefix(imp, prefix)) && !allowed(who, name) {
					t.Errorf("%s imports %s; rules.txt lets only these import %s: %s", name, imp, prefix, strings.Join(who, " "))
				}
			}
		}
		for fake, who := range r.testOnly {
			if slices.Contains(p.Imports, module+"/"+fake) && !allowed(who, name) {
				t.Errorf("%s imports %s, which only tests and %s may import", name, fake, strings.Join(who, " "))
			}
		}
	}
	for name := range r.project {
		if _, ok := pkgs[name]; !ok {
			t.Errorf("rules.txt lists %s, which is no package of the module: remove its line", name)
		}
	}
	for _, nv := range r.never {
		from, ok := pkgs[nv[0]]
		if !ok {
			t.Errorf("rules.txt: never %s -> %s: no package %s", nv[0], nv[1], nv[0])
			continue
		}
		for _, d := range from.Deps {
			target := rel(d)
			if target == "" {
				target = d
			}
			if target == nv[1] || strings.HasPrefix(target, nv[1]+"/") || (strings.HasSuffix(nv[1], "/") && strings.HasPrefix(target, nv[1])) {
				t.Errorf("%s depends on %s (directly or not); rules.txt says it never may", nv[0], target)
			}
		}
	}
}

func projectImports(imps []string) string {
	var out []string
	for _, i := range imps {
		if r := rel(i); r != "" {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return "nothing of the project"
	}
	return strings.Join(out, " ")
}

// TestRulesCatchAForbiddenImport checks the checker: a package importing
// what its line does not allow is reported.
func TestRulesCatchAForbiddenImport(t *testing.T) {
	r := readRules(t)
	if allowed(r.project["triggers"], "bus") {
		t.Fatal("rules.txt lets triggers import bus")
	}
	if !allowed([]string{"cmd/..."}, "cmd/triggerd") || allowed([]string{"cmd/..."}, "cmdx") {
		t.Fatal("prefix patterns match wrongly")
	}
}
