package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// The management API commands print their answer in one of three forms,
// chosen with -o as kubectl and gh choose theirs:
//
//   - table: for people, and the default when standard output is a
//     terminal: a list as aligned columns of the fields that tell its items
//     apart, one object as "field: value" lines, a step with its input and
//     output fields;
//   - json: the answer as one indented JSON document, and the default
//     otherwise, so that scripts piping triggerctl keep getting JSON;
//   - jsonl: a list's items one JSON object a line (for jq -c, grep and
//     while-read loops); any other answer on one line.
//
// An empty list says so on standard error ("no agents"), in every form,
// leaving standard output what the form promises.
const (
	outputTable = "table"
	outputJSON  = "json"
	outputJSONL = "jsonl"
)

// addOutputFlag adds -o to fs.
func addOutputFlag(fs *flag.FlagSet) *string {
	return fs.String("o", "", "output format: table (the default on a terminal), json (one document; the default otherwise) or jsonl (a list's items one a line)")
}

// outputFormat returns the format -o asked for, or the default for w.
func outputFormat(flagValue string, w io.Writer) (string, error) {
	switch flagValue {
	case outputTable, outputJSON, outputJSONL:
		return flagValue, nil
	case "":
		if isTerminal(w) {
			return outputTable, nil
		}
		return outputJSON, nil
	}
	return "", fmt.Errorf("-o %q: want table, json or jsonl", flagValue)
}

// linesFormat is outputFormat for the commands that printed JSON lines
// before they had -o (replay, delivery, redeliver, dead): their default
// when standard output is not a terminal stays jsonl, so that scripts
// piping them keep reading a line per item.
func linesFormat(flagValue string, w io.Writer) (string, error) {
	if flagValue == "" && !isTerminal(w) {
		return outputJSONL, nil
	}
	return outputFormat(flagValue, w)
}

// addLinesOutputFlag adds -o to fs, for the commands of linesFormat.
func addLinesOutputFlag(fs *flag.FlagSet) *string {
	return fs.String("o", "", "output format: table (the default on a terminal), jsonl (an item a line; the default otherwise) or json (one document)")
}

// listPrinter prints a list a command makes itself (not an API answer)
// in the forms printAnswer prints an API's list answer {name: [...]}:
// in jsonl each item as soon as it is added, so that a long run shows
// its progress, in the other forms all of them when flushed.
type listPrinter struct {
	stdout, stderr io.Writer
	format         string
	// name is the list's name, which picks its table columns
	// (listColumns); none, when set, is what an empty list says on
	// standard error in place of "no <name>".
	name, none string
	n          int
	items      []any
}

// add prints item, or keeps it for flush.
func (p *listPrinter) add(item any) error {
	p.n++
	if p.format == outputJSONL {
		return writeJSON(p.stdout, item, "")
	}
	p.items = append(p.items, item)
	return nil
}

// flush prints the items kept, and says so on standard error when there
// were none.
func (p *listPrinter) flush() error {
	if p.n == 0 {
		none := p.none
		if none == "" {
			none = "no " + strings.ReplaceAll(p.name, "_", " ")
		}
		fmt.Fprintln(p.stderr, none)
	}
	if p.format == outputJSONL {
		return nil
	}
	items := p.items
	if items == nil {
		items = []any{}
	}
	raw, err := json.Marshal(map[string]any{p.name: items})
	if err != nil {
		return err
	}
	// The empty list was told above.
	return printAnswer(p.stdout, io.Discard, p.format, raw)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// listColumns are the columns a list shows in a table, by the answer's
// list field; a list not named here shows its items' scalar fields.
var listColumns = map[string][]string{
	"agents":   {"id", "name", "delivery", "url", "runs_subject", "created_at"},
	"triggers": {"id", "kind", "agent", "enabled", "status", "account_status", "created_at"},
	"runs":     {"id", "status", "kind", "trigger_id", "agent_id", "delivery_status", "created_at"},
	"steps":    {"id", "name", "description"},
	"accounts": {"id", "connector", "login", "status", "created_at"},
	"keys":     {"id", "name", "created_at"},
	"kinds":    {"kind", "connector", "name", "delivery", "params"},
	"events":   {"event_id", "kind", "repository", "received_at", "outcomes"},
	"replay":   {"trigger_id", "result", "reason", "run_id"},
	// triggerctl's own lists (listPrinter).
	"dead_letters":       {"seq", "at", "source", "kind", "id", "deliveries", "reason"},
	"requeued":           {"seq", "source", "kind", "id", "subject"},
	"deliveries":         {"delivery_id", "connector", "event", "key", "received_at", "bytes"},
	"redelivered_events": {"delivery_id", "kind", "event_id", "published", "subject"},
}

// printAnswer writes raw, an API answer, to stdout in format; an empty
// list is also said on stderr.
func printAnswer(stdout, stderr io.Writer, format string, raw json.RawMessage) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		// Not JSON: print it as it came.
		_, err := fmt.Fprintln(stdout, string(raw))
		return err
	}
	listName, items, isList := listOf(v)
	if isList && len(items) == 0 {
		fmt.Fprintf(stderr, "no %s\n", strings.ReplaceAll(listName, "_", " "))
	}
	switch format {
	case outputJSONL:
		if !isList {
			return writeJSON(stdout, v, "")
		}
		for _, it := range items {
			if err := writeJSON(stdout, it, ""); err != nil {
				return err
			}
		}
		return nil
	case outputTable:
		switch {
		case isList:
			return writeTable(stdout, listName, items)
		case isStep(v):
			return writeStep(stdout, v.(map[string]any))
		default:
			return writeObject(stdout, v)
		}
	}
	return writeJSON(stdout, v, "  ")
}

// listOf returns the list an answer is: an object with one field, an
// array ({"agents": [...]}), as the API's list answers are.
func listOf(v any) (name string, items []any, ok bool) {
	m, isMap := v.(map[string]any)
	if !isMap || len(m) != 1 {
		return "", nil, false
	}
	for k, f := range m {
		items, ok = f.([]any)
		name = k
	}
	return name, items, ok
}

func writeJSON(w io.Writer, v any, indent string) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	return enc.Encode(v)
}

// writeTable writes items as columns, with a header line.
func writeTable(w io.Writer, listName string, items []any) error {
	if len(items) == 0 {
		return nil
	}
	cols := listColumns[listName]
	if cols == nil {
		first, _ := items[0].(map[string]any)
		for k, f := range first {
			if isScalar(f) {
				cols = append(cols, k)
			}
		}
		sort.Strings(cols)
	}
	// Leave out columns no item has a value for (url of NATS agents).
	cols = slices.DeleteFunc(slices.Clone(cols), func(c string) bool {
		return !slices.ContainsFunc(items, func(it any) bool { m, _ := it.(map[string]any); return cell(m[c]) != "" })
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := make([]string, len(cols))
	for i, c := range cols {
		header[i] = strings.ToUpper(strings.ReplaceAll(c, "_", " "))
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, it := range items {
		m, _ := it.(map[string]any)
		row := make([]string, len(cols))
		for i, c := range cols {
			row[i] = cell(m[c])
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// writeObject writes one object as "field: value" lines, nested lists and
// objects as indented JSON.
func writeObject(w io.Writer, v any) error {
	m, ok := v.(map[string]any)
	if !ok {
		return writeJSON(w, v, "  ")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	var nested []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if isScalar(m[k]) {
			fmt.Fprintf(tw, "%s:\t%s\n", k, cell(m[k]))
		} else {
			nested = append(nested, k)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// A body (a delivery's) is the longest by far: last, so that the
	// rest is not scrolled away.
	if i := slices.Index(nested, "body"); i >= 0 {
		nested = append(slices.Delete(nested, i, i+1), "body")
	}
	for _, k := range nested {
		b, _ := json.MarshalIndent(m[k], "  ", "  ")
		fmt.Fprintf(w, "%s:\n  %s\n", k, b)
	}
	return nil
}

// isStep reports whether v is a step as GET /v1/steps/{id} answers it.
func isStep(v any) bool {
	m, ok := v.(map[string]any)
	return ok && m["input_schema"] != nil && m["output_schema"] != nil
}

// writeStep writes a step for people: what it is, then its input fields
// (with those required marked) and its output fields, from its schemas.
func writeStep(w io.Writer, m map[string]any) error {
	fmt.Fprintf(w, "%s  %s (%s)\n%s\n", cell(m["id"]), cell(m["name"]), cell(m["connector"]), cell(m["description"]))
	for _, part := range []struct{ title, key string }{{"input", "input_schema"}, {"output", "output_schema"}} {
		schema, _ := m[part.key].(map[string]any)
		fmt.Fprintf(w, "\n%s:\n", part.title)
		props, _ := schema["properties"].(map[string]any)
		if len(props) == 0 {
			fmt.Fprintf(w, "  (%s)\n", schemaType(schema))
			continue
		}
		required := map[string]bool{}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				required[cell(r)] = true
			}
		}
		names := make([]string, 0, len(props))
		for k := range props {
			names = append(names, k)
		}
		// Required fields first, then by name.
		sort.Slice(names, func(i, j int) bool {
			if required[names[i]] != required[names[j]] {
				return required[names[i]]
			}
			return names[i] < names[j]
		})
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  FIELD\tTYPE\tREQUIRED\tDESCRIPTION")
		for _, n := range names {
			p, _ := props[n].(map[string]any)
			req := ""
			if required[n] {
				req = "yes"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", n, schemaType(p), req, oneLine(cell(p["description"]), 100))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// schemaType names a schema's type for people: "string", "integer",
// "array of string", "one of a, b" for an enum, "object".
func schemaType(s map[string]any) string {
	if enum, ok := s["enum"].([]any); ok {
		vals := make([]string, len(enum))
		for i, e := range enum {
			vals[i] = cell(e)
		}
		return "one of " + strings.Join(vals, ", ")
	}
	if _, ok := s["$ref"]; ok {
		return "object"
	}
	t := cell(s["type"])
	if list, ok := s["type"].([]any); ok {
		parts := make([]string, len(list))
		for i, e := range list {
			parts[i] = cell(e)
		}
		t = strings.Join(parts, " or ")
	}
	if t == "array" {
		if items, ok := s["items"].(map[string]any); ok {
			return "array of " + schemaType(items)
		}
	}
	if t == "" {
		return "any"
	}
	return t
}

// cell renders a value for a table cell: scalars as they are, times
// shortened to the second, lists of scalars comma-joined, lists of
// objects by their count, objects as "{…}".
func cell(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil && len(v) > len("2006-01-02T15:04:05") {
			return t.UTC().Format("2006-01-02 15:04:05Z")
		}
		return oneLine(v, 200)
	case json.Number:
		return v.String()
	case bool:
		return fmt.Sprint(v)
	case []any:
		if len(v) > 0 && !isScalar(v[0]) {
			return fmt.Sprintf("%d", len(v))
		}
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = cell(e)
		}
		return strings.Join(parts, ",")
	}
	return "{…}"
}

func isScalar(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return true
}

// oneLine makes s one line of at most n runes, so that a table's rows
// stay one line each.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
