package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const agentsAnswer = `{"agents":[{"id":"a1","name":"triage","delivery":"nats","runs_subject":"agents.a1.runs","steps":[],"created_at":"2026-12-01T10:00:00.123456Z"},` +
	`{"id":"a2","name":"hook","delivery":"http","url":"https://agent.example/runs","steps":[],"created_at":"2026-12-01T11:00:00Z"}]}`

func TestOutputForms(t *testing.T) {
	print := func(format, answer string) (string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := printAnswer(&out, &errOut, format, json.RawMessage(answer)); err != nil {
			t.Fatal(err)
		}
		return out.String(), errOut.String()
	}
	table, _ := print(outputTable, agentsAnswer)
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "NAME") || !strings.Contains(lines[0], "CREATED AT") ||
		!strings.Contains(lines[1], "triage") || !strings.Contains(lines[1], "2026-12-01 10:00:00Z") || !strings.Contains(lines[2], "https://agent.example/runs") {
		t.Errorf("table:\n%s", table)
	}
	jsonl, _ := print(outputJSONL, agentsAnswer)
	if ls := strings.Split(strings.TrimSuffix(jsonl, "\n"), "\n"); len(ls) != 2 || !json.Valid([]byte(ls[0])) || !strings.Contains(ls[1], `"id":"a2"`) {
		t.Errorf("jsonl:\n%s", jsonl)
	}
	doc, _ := print(outputJSON, agentsAnswer)
	var back map[string]any
	if err := json.Unmarshal([]byte(doc), &back); err != nil || len(back["agents"].([]any)) != 2 || !strings.Contains(doc, "\n  ") {
		t.Errorf("json: %v\n%s", err, doc)
	}
	// An empty list says so on standard error, whatever the form.
	for _, format := range []string{outputTable, outputJSONL, outputJSON} {
		out, errOut := print(format, `{"runs":[]}`)
		if errOut != "no runs\n" || (format != outputJSON && out != "") {
			t.Errorf("%s of no runs: stdout %q stderr %q", format, out, errOut)
		}
	}
	// One object: field lines.
	obj, _ := print(outputTable, `{"id":"r1","status":"failed","error":{"code":"x","message":"y"}}`)
	if !strings.Contains(obj, "status: failed") || !strings.Contains(obj, "error:\n") {
		t.Errorf("object:\n%s", obj)
	}
}

func TestStepShownForPeople(t *testing.T) {
	step := `{"id":"codehost.create_issue","name":"Create Issue","connector":"codehost","description":"Opens an issue.",
		"input_schema":{"type":"object","required":["owner","title"],"properties":{"owner":{"type":"string","description":"The owner."},"title":{"type":"string"},"labels":{"type":"array","items":{"type":"string"}},"state":{"enum":["open","closed"]}}},
		"output_schema":{"type":"object","properties":{"number":{"type":"integer"}}}}`
	var out, errOut bytes.Buffer
	if err := printAnswer(&out, &errOut, outputTable, json.RawMessage(step)); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"codehost.create_issue  Create Issue (codehost)\nOpens an issue.\n", "input:\n", "FIELD", "array of string", "one of open, closed", "output:\n", "number"} {
		if !strings.Contains(s, want) {
			t.Errorf("step lacks %q:\n%s", want, s)
		}
	}
	// Required fields come first.
	if strings.Index(s, "title") > strings.Index(s, "labels") {
		t.Errorf("required fields are not first:\n%s", s)
	}
}

// Without -o, output that is not a terminal (a pipe, a file) is JSON, as
// before, so scripts keep working; -o picks any form.
func TestOutputFlag(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(agentsAnswer))
	}))
	defer srv.Close()
	for format, want := range map[string]string{"": "{\n", "json": "{\n", "table": "ID", "jsonl": `{"created_at"`} {
		args := []string{"agents", "list", "--url", srv.URL, "--api-key", "k"}
		if format != "" {
			args = append(args, "-o", format)
		}
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), want) {
			t.Errorf("-o %q: %d %q %q, want it to start %q", format, code, out.String(), errOut.String(), want)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"agents", "list", "--url", srv.URL, "--api-key", "k", "-o", "yaml"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "want table, json or jsonl") {
		t.Errorf("-o yaml: %d %q", code, errOut.String())
	}
}
