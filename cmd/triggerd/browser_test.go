package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/triggerd/triggerd/internal/testenv"
)

// The console's browser test: a real headless Chromium (Debian's
// chromium package) driven through the DevTools protocol, against the
// triggerd binary the process tests build, run with --sandbox on random
// ports. The built binary is what users run, so the test covers the
// wiring in serve as well as the pages. Screenshots of every page go to
// the folder $TRIGGERD_SCREENSHOTS names, when set.

// hostileTitle must show as text and run nothing.
const hostileTitle = `<img src=x onerror=alert(1)>`

// chromiumPath returns Debian's chromium, or reports it missing.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Missing(t, "chromium (apt-get install chromium)", exec.ErrNotFound)
	return ""
}

// browser is a tab of a headless Chromium with what its pages reported.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string
	// problems is shared by every tab of one browser.
	problems *problems
}

type problems struct {
	mu      sync.Mutex
	errors  []string
	dialogs []string
	// refused are the paths the test has the server refuse on purpose
	// (a wrong key, a POST without its token, another tenant's URL):
	// the browser logs those answers as errors, which are expected.
	refused map[string]bool
}

// expectRefusal marks path as refused on purpose.
func (b *browser) expectRefusal(path string) {
	b.problems.mu.Lock()
	defer b.problems.mu.Unlock()
	if b.problems.refused == nil {
		b.problems.refused = map[string]bool{}
	}
	b.problems.refused[path] = true
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, shots: os.Getenv("TRIGGERD_SCREENSHOTS"), problems: &problems{}}
	b.listen()
	return b
}

// listen records the tab's console errors, uncaught exceptions and
// browser-log errors (a CSP violation is one), and its dialogs (an alert
// would be a script that should not have run), dismissing them.
func (b *browser) listen() {
	b.t.Helper()
	messages := chromedp.Console(b.ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				b.problems.mu.Lock()
				path := m.URL
				if u, err := url.Parse(m.URL); err == nil {
					path = u.Path
				}
				if !(m.Source == "network" && b.problems.refused[path]) {
					b.problems.errors = append(b.problems.errors, m.String()+" at "+m.URL)
				}
				b.problems.mu.Unlock()
			}
		}
	}()
	if err := chromedp.Listen(b.ctx, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			b.problems.mu.Lock()
			b.problems.dialogs = append(b.problems.dialogs, d.Message)
			b.problems.mu.Unlock()
			go chromedp.Call(b.ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}); err != nil {
		b.t.Fatalf("starting chromium: %v", err)
	}
}

// tab opens another tab of the same browser (same cookies).
func (b *browser) tab() *browser {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	b.t.Cleanup(cancel)
	t := &browser{t: b.t, ctx: ctx, shots: b.shots, problems: b.problems}
	t.listen()
	return t
}

func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// text returns the page's visible text.
func (b *browser) text() string {
	b.t.Helper()
	return b.textIn("body")
}

// textIn returns the visible text of the element sel selects.
func (b *browser) textIn(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("read the text of %s: %v", sel, err)
	}
	return s
}

// eventually polls the text of the element sel selects until it
// contains want, without reloading: what the page's own script
// refreshes. sel is the refreshed part, so that want found elsewhere on
// the page (a filter's option) does not count.
func (b *browser) eventually(sel, want string, d time.Duration) {
	b.t.Helper()
	b.front()
	deadline := time.Now().Add(d)
	for !strings.Contains(b.textIn(sel), want) {
		if time.Now().After(deadline) {
			state := evalIn[string](b, `document.visibilityState + " refreshed=" + document.documentElement.getAttribute("data-refreshed")`)
			b.t.Fatalf("timed out after %s waiting for %q in %s without a reload (page %s); it shows %q", d, want, sel, state, b.textIn(sel))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// front makes the tab the visible one: the console refreshes only a
// visible page.
func (b *browser) front() {
	b.t.Helper()
	if _, err := chromedp.Call(b.ctx, page.BringToFront, cdp.Empty{}); err != nil {
		b.t.Fatalf("bring the tab to the front: %v", err)
	}
}

func evalIn[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

func (b *browser) attr(sel, name string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
	if err != nil {
		b.t.Fatalf("attribute %s of %s: %v", name, sel, err)
	}
	return v.Value
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	if b.shots == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) seen() ([]string, []string) {
	b.problems.mu.Lock()
	defer b.problems.mu.Unlock()
	return append([]string(nil), b.problems.errors...), append([]string(nil), b.problems.dialogs...)
}

func TestConsoleInBrowser(t *testing.T) {
	br := newBrowser(t)
	dir := t.TempDir()
	p := startTriggerd(t, []string{"TRIGGERD_DATA_DIR=" + dir}, "--sandbox")
	api, ids := sandboxAPI(t, &p, dir)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("triggerd's log:\n%s", p.logs())
		}
	})
	key, err := os.ReadFile(filepath.Join(dir, "default_tenant_key"))
	if err != nil {
		t.Fatal(err)
	}
	u := func(path string) string { return p.httpURL + "/console/" + path }

	// Sign in.
	br.do("open the console", chromedp.Navigate(u("")), chromedp.WaitVisible(chromedp.ID("api_key")))
	if s := br.text(); !strings.Contains(s, "API key") || !strings.Contains(s, "data/default_tenant_key") {
		t.Fatalf("sign-in page: %q", s)
	}
	br.screenshot("01-signin")
	br.expectRefusal("/console/signin")
	br.do("a wrong key", chromedp.SendKeys(chromedp.ID("api_key"), "not-a-key"), chromedp.Click(chromedp.CSS("button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(".error")))
	br.do("sign in", chromedp.SetValue(chromedp.ID("api_key"), strings.TrimSpace(string(key))),
		chromedp.Click(chromedp.CSS("button[type=submit]")), chromedp.WaitVisible(chromedp.CSS("nav")))
	nav := br.text()
	for _, name := range []string{"Overview", "Integrations", "Tool steps", "Agents", "Triggers", "Deliveries", "Events", "Runs", "Dead letters"} {
		if !strings.Contains(nav, name) {
			t.Errorf("the navigation lacks %q", name)
		}
	}

	// The three sandbox accounts on Integrations.
	br.do("Integrations", chromedp.Navigate(u("integrations")), chromedp.WaitVisible(chromedp.CSS("main h1")))
	for _, want := range []string{"octocat", "sandbox-team", "analyst@example.com", "Add integration", "Remove"} {
		if !strings.Contains(br.text(), want) {
			t.Errorf("Integrations lacks %q", want)
		}
	}
	br.screenshot("03-integrations")

	// Create Issue from its form.
	br.do("Tool steps", chromedp.Navigate(u("steps?q=issue")), chromedp.WaitVisible(chromedp.CSS("main h1")))
	br.screenshot("04-steps")
	br.do("run Create Issue from its form", chromedp.Navigate(u("steps/codehost.create_issue")),
		chromedp.WaitVisible(chromedp.ID("in_title")),
		chromedp.SetValue(chromedp.ID("account"), ids["codehost"]),
		chromedp.SendKeys(chromedp.ID("in_owner"), "octocat"),
		chromedp.SendKeys(chromedp.ID("in_repo"), "hello-world"),
		chromedp.SendKeys(chromedp.ID("in_title"), "Opened from the console form"),
		chromedp.Click(chromedp.CSS("#step-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.ID("output")))
	if s := br.text(); !strings.Contains(s, "Opened from the console form") || !strings.Contains(s, `"number"`) {
		t.Fatalf("Create Issue's output: %q", s)
	}
	br.screenshot("05-step-run")

	// An agent and a new_issue trigger from the forms.
	br.do("create an agent", chromedp.Navigate(u("agents")), chromedp.WaitVisible(chromedp.ID("agent-name")),
		chromedp.SendKeys(chromedp.ID("agent-name"), "Triage agent"),
		chromedp.Click(chromedp.CSS("#agent-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(".secret")))
	br.screenshot("06-agent-created")
	_, agents := api(http.MethodGet, "/v1/agents", "")
	list, _ := agents["agents"].([]any)
	if len(list) != 1 {
		t.Fatalf("agents after the form: %v", agents)
	}
	agentID := list[0].(map[string]any)["id"].(string)
	br.do("create a new_issue trigger", chromedp.Navigate(u("triggers/new")), chromedp.WaitVisible(chromedp.ID("kind")),
		chromedp.SetValue(chromedp.ID("kind"), "new_issue"),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			// As a person's choice would: the form shows the kind's parameters.
			_, err := chromedp.Evaluate[any](`document.getElementById("kind").dispatchEvent(new Event("change"))`)(ctx, t)
			return err
		}),
		chromedp.SetValue(chromedp.ID("account"), ids["codehost"]),
		chromedp.SetValue(chromedp.ID("agent"), agentID))
	if hidden := evalIn[bool](br, `document.getElementById("param_column_id").closest(".param").hidden && !document.getElementById("param_repositories").closest(".param").hidden`); !hidden {
		t.Error("the trigger form does not show only new_issue's parameters")
	}
	br.screenshot("07-trigger-form")
	br.do("test the draft against recent events", chromedp.SendKeys(chromedp.ID("param_repositories"), "octocat/hello-world"),
		chromedp.Click(chromedp.ID("test-trigger")), chromedp.WaitVisible(chromedp.ID("dry-run")))
	if s := br.text(); !strings.Contains(s, "Nothing was started") {
		t.Fatalf("the trigger test's report: %q", s)
	}
	br.screenshot("07b-trigger-test")
	br.do("create the trigger", chromedp.Click(chromedp.CSS("#trigger-form button[value=create]")),
		chromedp.WaitVisible(chromedp.CSS(".flash")))
	if s := br.text(); !strings.Contains(s, "Trigger created") {
		t.Fatalf("after creating the trigger: %q", s)
	}
	br.screenshot("08-trigger")
	_, trs := api(http.MethodGet, "/v1/triggers", "")
	tl, _ := trs["triggers"].([]any)
	if len(tl) != 1 {
		t.Fatalf("triggers after the form: %v", trs)
	}
	triggerID := tl[0].(map[string]any)["id"].(string)
	if s := br.text(); !strings.Contains(s, "/webhooks/codehost/") || !strings.Contains(s, "octocat/hello-world") {
		t.Fatalf("the trigger's page shows no hook on the sandbox repository: %q", s)
	}

	// Deliveries, Events and Runs open in tabs before the issue is
	// opened: what it causes must appear in them without a reload.
	deliveries, events, runs := br.tab(), br.tab(), br.tab()
	deliveries.do("Deliveries", chromedp.Navigate(u("deliveries")), chromedp.WaitVisible(chromedp.ID("rows")))
	events.do("Events", chromedp.Navigate(u("events")), chromedp.WaitVisible(chromedp.ID("rows")))
	runs.do("Runs", chromedp.Navigate(u("runs")), chromedp.WaitVisible(chromedp.ID("rows")))

	// An issue with a hostile title, opened through a step: the sandbox
	// delivers its webhook to the trigger's hook.
	code, out := api(http.MethodPost, "/v1/steps/codehost.create_issue/run",
		`{"account":"`+ids["codehost"]+`","input":{"owner":"octocat","repo":"hello-world","title":`+jsonString(hostileTitle)+`}}`)
	if code != http.StatusOK {
		t.Fatalf("create the hostile issue: %d %v", code, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			_, runs := api(http.MethodGet, "/v1/runs", "")
			_, tr := api(http.MethodGet, "/v1/triggers", "")
			t.Logf("issue %v\nruns %v\ntriggers %v", out, runs, tr)
		}
	})
	deliveries.eventually("#rows", "issues.opened", 30*time.Second)
	deliveries.screenshot("09-deliveries")
	events.eventually("#rows", "new_issue", 30*time.Second)
	events.screenshot("10-events")
	runs.eventually("#rows", "new_issue", 30*time.Second)
	runs.screenshot("11-runs")
	// Each list shows the title, as text.
	for name, list := range map[string]*browser{"Deliveries": deliveries, "Events": events, "Runs": runs} {
		list.eventually("#rows", hostileTitle, 30*time.Second)
		if imgs := evalIn[int](list, `document.querySelectorAll('img').length`); imgs != 0 {
			t.Errorf("%s has %d img elements: the title became markup", name, imgs)
		}
	}

	// The delivery's page: the hostile title is text, nothing runs.
	deliveries.do("open the delivery", chromedp.Click(chromedp.CSS("#rows tr:first-child td a")),
		chromedp.WaitVisible(chromedp.CSS("pre.json")))
	if s := deliveries.text(); !strings.Contains(s, hostileTitle) || !strings.Contains(s, "accepted") {
		t.Fatalf("the delivery's page does not show the title as text: %q", s)
	}
	if imgs := evalIn[int](deliveries, `document.querySelectorAll('img').length`); imgs != 0 {
		t.Errorf("the delivery's page has %d img elements: the title became markup", imgs)
	}
	if s := deliveries.text(); strings.Contains(s, "X-Hub-Signature-256: sha256=") {
		t.Error("the delivery's page shows the signature header")
	}
	deliveries.screenshot("12-delivery")

	// Its event: outcome started, linked to the run.
	deliveries.do("open its event", chromedp.Click(chromedp.CSS("ul.events a")), chromedp.WaitVisible(chromedp.ID("event-live")))
	deliveries.eventually("#event-live", "started", 30*time.Second)
	deliveries.screenshot("13-event")
	deliveries.do("open its run", chromedp.Click(chromedp.CSS("#event-live td a.mono[href^='/console/runs/']")),
		chromedp.WaitVisible(chromedp.ID("run-live")))
	if s := deliveries.text(); !strings.Contains(s, "new_issue") {
		t.Errorf("the run's page: %q", s)
	}
	deliveries.screenshot("14-run")

	// Redeliver: the same delivery again is answered duplicate.
	deliveries.do("back to the delivery", chromedp.Navigate(u("deliveries?answer=accepted")), chromedp.WaitVisible(chromedp.ID("rows")),
		chromedp.Click(chromedp.CSS("#rows tr:first-child td a")), chromedp.WaitVisible(chromedp.CSS(".actions")),
		chromedp.Click(chromedp.CSS(".actions form:first-child button")), chromedp.WaitVisible(chromedp.CSS(".flash")))
	if s := deliveries.text(); !strings.Contains(s, "Redelivered: answered duplicate") {
		t.Fatalf("after Redeliver: %q", s)
	}
	deliveries.screenshot("15-redelivered")

	// Redeliver filtered: the confirmation states the count.
	deliveries.do("filter and ask to redeliver the set", chromedp.Navigate(u("deliveries?event=issues.opened")),
		chromedp.WaitVisible(chromedp.ID("redeliver-filtered")), chromedp.Click(chromedp.ID("redeliver-filtered")),
		chromedp.WaitVisible(chromedp.CSS("main form")))
	if s := deliveries.text(); !strings.Contains(s, "Redeliver 1 delivery?") {
		t.Fatalf("the confirmation of Redeliver filtered: %q", s)
	}
	deliveries.screenshot("16-redeliver-filtered")
	deliveries.do("confirm", chromedp.Click(chromedp.CSS("main form button[type=submit]")), chromedp.WaitVisible(chromedp.CSS(".flash")))
	if s := deliveries.text(); !strings.Contains(s, "Redelivered the filtered set: 1 duplicate.") {
		t.Fatalf("after Redeliver filtered: %q", s)
	}

	// A POST without the CSRF token is refused and changes nothing.
	br.do("a page", chromedp.Navigate(u("triggers")), chromedp.WaitVisible(chromedp.CSS("main h1")))
	br.expectRefusal("/console/triggers/" + triggerID + "/delete")
	if status := evalIn[int](br, `fetch('/console/triggers/`+triggerID+`/delete', {method: 'POST', credentials: 'same-origin'}).then(r => r.status)`); status != http.StatusForbidden {
		t.Errorf("POST without the CSRF token: %d, want 403", status)
	}
	if code, _ := api(http.MethodGet, "/v1/triggers/"+triggerID, ""); code != http.StatusOK {
		t.Errorf("the trigger is gone after a POST without the token: %d", code)
	}

	// Every page of the navigation, for the screenshots and the console
	// errors.
	for i, pg := range []string{"", "integrations", "steps", "agents", "triggers", "deliveries", "events", "runs", "dead"} {
		br.do("open "+pg, chromedp.Navigate(u(pg)), chromedp.WaitVisible(chromedp.CSS("main h1")))
		name := pg
		if name == "" {
			name = "overview"
		}
		br.screenshot(fmt.Sprintf("2%d-%s", i, name))
	}
	var runPath string
	_, runList := api(http.MethodGet, "/v1/runs", "")
	rl, _ := runList["runs"].([]any)
	if len(rl) == 0 {
		t.Fatal("no runs")
	}
	runPath = "runs/" + rl[0].(map[string]any)["id"].(string)

	// Another tenant's URLs are 404.
	adminKey, err := os.ReadFile(filepath.Join(dir, "admin_key"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, p.httpURL+"/v1/tenants", strings.NewReader(`{"name":"other"}`))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(adminKey)))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		APIKey string `json:"api_key"`
	}
	json.NewDecoder(res.Body).Decode(&created)
	res.Body.Close()
	if created.APIKey == "" {
		t.Fatalf("creating another tenant: %d", res.StatusCode)
	}
	br.do("the deliveries", chromedp.Navigate(u("deliveries")), chromedp.WaitVisible(chromedp.ID("rows")))
	deliveryURL := br.attr("#rows tr:first-child td a", "href")
	br.do("sign out", chromedp.Click(chromedp.CSS(".who button")), chromedp.WaitVisible(chromedp.ID("api_key")))
	br.do("sign in as the other tenant", chromedp.SetValue(chromedp.ID("api_key"), created.APIKey),
		chromedp.Click(chromedp.CSS("button[type=submit]")), chromedp.WaitVisible(chromedp.CSS("nav")))
	for _, path := range []string{deliveryURL, "/console/" + runPath, "/console/triggers/" + triggerID, "/console/agents/" + agentID} {
		br.expectRefusal(path)
		if status := evalIn[int](br, `fetch(`+jsonString(path)+`, {credentials: 'same-origin'}).then(r => r.status)`); status != http.StatusNotFound {
			t.Errorf("the other tenant GET %s: %d, want 404", path, status)
		}
	}
	br.do("the other tenant on the first tenant's trigger", chromedp.Navigate(p.httpURL+"/console/triggers/"+triggerID),
		chromedp.WaitVisible(chromedp.CSS("main h1")))
	br.screenshot("30-other-tenant-404")

	errs, dialogs := br.seen()
	if len(errs) > 0 {
		t.Errorf("JavaScript errors in the browser: %q", errs)
	}
	if len(dialogs) > 0 {
		t.Errorf("dialogs opened (a script ran): %q", dialogs)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
