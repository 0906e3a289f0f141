package oascheck

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// route is one path template of the description, split for matching.
type route struct {
	template string
	segs     []segment
	// multi: the last segment is a parameter that spans any number of
	// segments, none included (GitHub marks such parameters
	// x-multi-segment: the contents API's {path}).
	multi bool
}

// segment is one segment of a path template: a literal, a whole-segment
// parameter ("{owner}") or a pattern mixing both ("{name}.json").
type segment struct {
	literal string
	param   bool
	re      *regexp.Regexp
}

var paramRE = regexp.MustCompile(`\{[^}/]+\}`)

func compileRoute(template string, multi bool) route {
	r := route{template: template, multi: multi}
	for _, s := range strings.Split(strings.Trim(template, "/"), "/") {
		switch {
		case !strings.Contains(s, "{"):
			r.segs = append(r.segs, segment{literal: s})
		case paramRE.FindString(s) == s:
			r.segs = append(r.segs, segment{param: true})
		default:
			parts := paramRE.Split(s, -1)
			for i, p := range parts {
				parts[i] = regexp.QuoteMeta(p)
			}
			r.segs = append(r.segs, segment{re: regexp.MustCompile("^" + strings.Join(parts, "[^/]+") + "$")})
		}
	}
	return r
}

// score says how well r matches the path's segments: ok is false when
// it does not; otherwise rank orders matches, literal segments before
// patterns before parameters, left to right, as routers prefer, and a
// multi-segment parameter's match below every exact one.
func (r route) score(segs []string) (rank string, ok bool) {
	n := len(r.segs)
	greedy := false
	if len(segs) != n {
		if !r.multi || len(segs) < n-1 {
			return "", false
		}
		greedy = true
	}
	var b strings.Builder
	if greedy {
		b.WriteByte('0')
	} else {
		b.WriteByte('1')
	}
	for i, s := range r.segs {
		if i >= len(segs) {
			break // an empty multi-segment parameter
		}
		seg := segs[i]
		switch {
		case s.param:
			if seg == "" {
				return "", false
			}
			b.WriteByte('0')
		case s.re != nil:
			if !s.re.MatchString(seg) {
				return "", false
			}
			b.WriteByte('1')
		default:
			if s.literal != seg {
				return "", false
			}
			b.WriteByte('2')
		}
	}
	return b.String(), true
}

// router finds an exchange's path template among a description's paths.
type router []route

func newRouter(paths map[string]any, multi func(template string) bool) router {
	rt := make(router, 0, len(paths))
	for t := range paths {
		rt = append(rt, compileRoute(t, multi(t)))
	}
	sort.Slice(rt, func(i, j int) bool { return rt[i].template < rt[j].template })
	return rt
}

// find is findFor accepting every template.
func (rt router) find(p *url.URL, basePath string) (template, path string) {
	return rt.findFor(p, basePath, nil)
}

// findFor returns the template that best matches the request path p (with
// basePath, the servers' path, removed), or "". Templates accept (when
// not nil) takes are preferred: a description may spell one path twice
// with differently named parameters, each with its own methods (Vercel's
// GET /v13/deployments/{idOrUrl} and DELETE /v13/deployments/{id}). When
// the template's last parameter spans several segments (or none), path is
// p's escaped path with those segments' slashes escaped (or an empty last
// segment), so that validators, which match one segment per parameter,
// find the same template; otherwise path is p's.
func (rt router) findFor(p *url.URL, basePath string, accept func(template string) bool) (template, path string) {
	escaped := strings.TrimPrefix(p.EscapedPath(), basePath)
	raw := strings.Split(strings.Trim(escaped, "/"), "/")
	segs := make([]string, len(raw))
	for i, s := range raw {
		if u, err := url.PathUnescape(s); err == nil {
			s = u
		}
		segs[i] = s
	}
	var best route
	bestRank, bestAccepted := "", false
	for _, r := range rt {
		rank, ok := r.score(segs)
		if !ok {
			continue
		}
		accepted := accept == nil || accept(r.template)
		if accepted && !bestAccepted || accepted == bestAccepted && rank > bestRank {
			best, bestRank, bestAccepted = r, rank, accepted
		}
	}
	if bestRank == "" {
		return "", p.EscapedPath()
	}
	n := len(best.segs)
	if len(raw) == n {
		return best.template, p.EscapedPath()
	}
	if len(raw) == n-1 {
		// An empty multi-segment parameter names the root ("/repos/o/r/
		// contents" lists the repository's top folder): validators need a
		// segment, so it is checked as "/", the root it names.
		return best.template, basePath + "/" + strings.Join(raw, "/") + "/%2F"
	}
	joined := append(raw[:n-1:n-1], strings.Join(raw[n-1:], "%2F"))
	return best.template, basePath + "/" + strings.Join(joined, "/")
}

// prune returns a copy of doc holding only the operations keep names
// (template -> lower-case methods), the path-level fields of their path
// items, and the components those reach through $ref: building a
// validator compiles every schema of what it is given, and GitHub's
// description holds thousands.
func prune(doc map[string]any, keep map[string]map[string]bool) (map[string]any, error) {
	paths, _ := doc["paths"].(map[string]any)
	out := map[string]any{}
	for _, k := range []string{"openapi", "info", "servers"} {
		if v, ok := doc[k]; ok {
			out[k] = v
		}
	}
	keptPaths := map[string]any{}
	for template, methods := range keep {
		item, ok := paths[template].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("oascheck: no path %s in the description", template)
		}
		kept := map[string]any{}
		for k, v := range item {
			if isMethod(k) && !methods[k] {
				continue
			}
			kept[k] = v
		}
		keptPaths[template] = kept
	}
	out["paths"] = keptPaths

	components, _ := doc["components"].(map[string]any)
	keptComponents := map[string]any{}
	var walk func(v any) error
	walk = func(v any) error {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				if err := reach(ref, components, keptComponents, walk); err != nil {
					return err
				}
			}
			for _, e := range v {
				if err := walk(e); err != nil {
					return err
				}
			}
		case []any:
			for _, e := range v {
				if err := walk(e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(keptPaths); err != nil {
		return nil, err
	}
	if len(keptComponents) > 0 {
		out["components"] = keptComponents
	}
	return withoutDiscriminators(out).(map[string]any), nil
}

// withoutDiscriminators returns a deep copy of v without its
// discriminator objects. A discriminator is a hint for choosing among
// oneOf's alternatives; without it oneOf still holds an answer to exactly
// one of them. Validators enforce it, though, and GitHub's description
// puts one over an alternative that is an array (the contents API's
// directory listing, mapped as "array"), which no array can satisfy.
func withoutDiscriminators(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if d, ok := e.(map[string]any); ok && k == "discriminator" {
				if _, isHint := d["propertyName"].(string); isHint {
					continue
				}
			}
			out[k] = withoutDiscriminators(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = withoutDiscriminators(e)
		}
		return out
	}
	return v
}

// reach copies the component ref names ("#/components/schemas/x") from
// all into kept, walking it the first time.
func reach(ref string, all, kept map[string]any, walk func(any) error) error {
	rest, ok := strings.CutPrefix(ref, "#/components/")
	if !ok {
		return fmt.Errorf("oascheck: $ref %q: only references into #/components are followed", ref)
	}
	kind, name, ok := strings.Cut(rest, "/")
	if !ok || strings.Contains(name, "/") {
		return fmt.Errorf("oascheck: $ref %q does not name one component", ref)
	}
	name = strings.NewReplacer("~1", "/", "~0", "~").Replace(name)
	src, _ := all[kind].(map[string]any)
	v, ok := src[name]
	if !ok {
		return fmt.Errorf("oascheck: $ref %q names no component of the description", ref)
	}
	dst, _ := kept[kind].(map[string]any)
	if dst == nil {
		dst = map[string]any{}
		kept[kind] = dst
	}
	if _, done := dst[name]; done {
		return nil
	}
	dst[name] = v
	return walk(v)
}

func isMethod(k string) bool {
	switch k {
	case "get", "put", "post", "delete", "options", "head", "patch", "trace":
		return true
	}
	return false
}

// multiSegment reports whether the last segment of template is a
// parameter marked x-multi-segment in its path item or an operation,
// inline or through #/components/parameters.
func multiSegment(doc map[string]any, template string) bool {
	last := template[strings.LastIndex(template, "/")+1:]
	if !strings.HasPrefix(last, "{") || !strings.HasSuffix(last, "}") {
		return false
	}
	name := last[1 : len(last)-1]
	item, _ := doc["paths"].(map[string]any)[template].(map[string]any)
	components, _ := doc["components"].(map[string]any)
	shared, _ := components["parameters"].(map[string]any)
	marked := func(params any) bool {
		list, _ := params.([]any)
		for _, p := range list {
			pm, _ := p.(map[string]any)
			if ref, ok := pm["$ref"].(string); ok {
				pm, _ = shared[strings.TrimPrefix(ref, "#/components/parameters/")].(map[string]any)
			}
			if pm["name"] == name && pm["in"] == "path" && pm["x-multi-segment"] == true {
				return true
			}
		}
		return false
	}
	if marked(item["parameters"]) {
		return true
	}
	for k, op := range item {
		if om, ok := op.(map[string]any); ok && isMethod(k) && marked(om["parameters"]) {
			return true
		}
	}
	return false
}
