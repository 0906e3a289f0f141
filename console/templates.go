package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/url"
	"slices"
	"strings"
	"time"
)

// funcs are the helpers templates use. None of them returns markup built
// from data: everything they return is escaped by html/template.
var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
	},
	"iso":    func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"pretty": prettyJSON,
	// has reports whether the form values hold value under key (a
	// checkbox to show checked again).
	"has": func(vs url.Values, key, value string) bool { return slices.Contains(vs[key], value) },
	// pipelineRow pairs a pipeline row (nil: an empty one, for the
	// script to copy) with the agents page's data.
	"pipelineRow": func(data map[string]any, row any) map[string]any {
		r, _ := row.(pipelineRow)
		return map[string]any{"Row": r, "Catalogue": data["Catalogue"], "Accounts": data["Accounts"]}
	},
	"short": func(s string, n int) string {
		if r := []rune(s); len(r) > n {
			return string(r[:n-1]) + "…"
		}
		return s
	},
	"dur": func(a, b time.Time) string {
		if a.IsZero() || b.IsZero() {
			return "—"
		}
		return b.Sub(a).Round(time.Millisecond).String()
	},
	"join": strings.Join,
	"eq2":  func(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) },
}

// prettyJSON indents raw JSON; anything else is returned as it is.
func prettyJSON(raw any) string {
	var b []byte
	switch v := raw.(type) {
	case json.RawMessage:
		b = v
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		out, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(out)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return string(b)
	}
	return out.String()
}

// parsePages parses every page template with the layout: one template
// set per page, named by its file without ".html".
func parsePages() (map[string]*template.Template, error) {
	layout, err := fs.ReadFile(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: layout: %w", err)
	}
	files, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		body, err := fs.ReadFile(templateFS, f)
		if err != nil {
			return nil, fmt.Errorf("console: %s: %w", f, err)
		}
		t, err := template.New("layout").Funcs(funcs).Parse(string(layout))
		if err == nil {
			_, err = t.New(name).Parse(string(body))
		}
		if err != nil {
			return nil, fmt.Errorf("console: parse %s: %w", f, err)
		}
		pages[name] = t
	}
	return pages, nil
}
