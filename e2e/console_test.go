package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ternmq/tern/internal/testcluster"
)

// The web console in a real browser: headless Chromium driven through the
// DevTools protocol (chromedp) against a running node.

// findChromium returns a Chromium or Chrome binary. Without one the test
// is skipped, except in CI, where a missing browser is a failure.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium found (chromium, chromium-browser or google-chrome on PATH); CI installs it in .ci/run")
	}
	t.Skip("no Chromium on PATH; install chromium to run the console's browser test")
	return ""
}

// artifactDir is where tests leave files for people to look at:
// $TERN_TEST_ARTIFACTS, or tern-artifacts in the temporary directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TERN_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "tern-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pageErrors collects what the page reports as an error: console.error
// and console.assert calls, uncaught exceptions and unhandled rejections,
// and error entries of the browser log (failed loads, refused by the
// content security policy, ...).
type pageErrors struct {
	mu   sync.Mutex
	list []string
}

func (p *pageErrors) listen(ev any) {
	var msg string
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if e.Type != runtime.ConsoleAPICalledTypeError && e.Type != runtime.ConsoleAPICalledTypeAssert {
			return
		}
		var args []string
		for _, a := range e.Args {
			if a.Description != "" {
				args = append(args, a.Description)
			} else {
				args = append(args, string(a.Value))
			}
		}
		msg = "console." + string(e.Type) + ": " + strings.Join(args, " ")
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails
		msg = "uncaught: " + d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		msg += fmt.Sprintf(" at %s:%d", d.URL, d.LineNumber)
	case *log.EventEntryAdded:
		if e.Entry.Level != log.EntryLevelError {
			return
		}
		msg = fmt.Sprintf("log (%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL)
	default:
		return
	}
	p.mu.Lock()
	p.list = append(p.list, msg)
	p.mu.Unlock()
}

func (p *pageErrors) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.list...)
}

// browser is one headless Chromium tab with its error collector.
type browser struct {
	t    *testing.T
	ctx  context.Context
	errs *pageErrors
}

func newBrowser(t *testing.T, exe string, budget time.Duration) *browser {
	t.Helper()
	// The budget bounds the whole browser: when it passes, every pending
	// action fails and Chromium is stopped.
	root, cancelRoot := context.WithTimeout(context.Background(), budget)
	t.Cleanup(cancelRoot)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // tests may run as root, where Chromium's sandbox refuses to start
		chromedp.WindowSize(1440, 960),
		chromedp.Flag("lang", "en-US"),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(root, opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	b := &browser{t: t, ctx: ctx, errs: &pageErrors{}}
	if err := chromedp.Listen(ctx, b.errs.listen); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	return b
}

// do runs actions, failing the test on an error.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v%s", what, err, b.state())
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v%s", expr, err, b.state())
	}
	return v
}

// wait polls a JavaScript function of args until it returns a truthy
// value, for up to d.
func (b *browser) wait(what string, d time.Duration, fn string, args ...any) {
	b.t.Helper()
	_, err := chromedp.Run(b.ctx, chromedp.PollFunction[chromedp.Void](fn,
		chromedp.WithPollingArgs(args...), chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(d)))
	if err != nil {
		b.t.Fatalf("waiting for %s: %v%s", what, err, b.state())
	}
}

// state describes the page for a failure message: its banner and errors.
func (b *browser) state() string {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	banner, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById('banner') || {}).textContent || ''`))
	return fmt.Sprintf("\npage banner: %q\npage errors: %q", banner, b.errs.all())
}

// screenshot writes a full-page PNG into the artifact directory.
func (b *browser) screenshot(dir, name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

// noErrors fails the test if the page has reported any error or shows
// its error banner.
func (b *browser) noErrors(when string) {
	b.t.Helper()
	if errs := b.errs.all(); len(errs) > 0 {
		b.t.Fatalf("%s: the page reported %d errors:\n%s", when, len(errs), strings.Join(errs, "\n"))
	}
	if !eval[bool](b, `document.getElementById('banner').hidden`) {
		b.t.Fatalf("%s: the page shows an error banner%s", when, b.state())
	}
}

// TestConsole: the console loads in Chromium without errors, lists a topic
// the test created with its partitions, shows the topic's partitions and
// subscriptions, tails it live through the WebSocket reader (a message
// produced through Kafka shows up with its key, property and payload, as
// text), and shows the mesh of two regions. Screenshots are left as
// artifacts.
func TestConsole(t *testing.T) {
	exe := findChromium(t)
	c := testcluster.Start(t, testcluster.Spec{Region: "eu-west"}, testcluster.Spec{Region: "us-east"})
	c.WaitMesh(20 * time.Second)
	n := c.Node(0)
	topic := fmt.Sprintf("console-orders-%d", time.Now().UnixNano()%1e6)
	createTopic(t, n.KafkaAddr(), topic, 3, nil)
	kc := kgoClient(t, n.KafkaAddr(), kgo.DefaultProduceTopic(topic))
	produce := func(recs ...*kgo.Record) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := kc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	// A durable subscription (it starts at the latest message) that holds
	// what it gets unacknowledged, so the topic has a backlog to show.
	audit := wsDial(t, n, "/ws/v2/consumer/persistent/public/default/"+topic+"/audit?subscriptionType=Shared&receiverQueueSize=2")
	for i := range 9 {
		produce(&kgo.Record{Key: fmt.Appendf(nil, "order-%d", i), Value: fmt.Appendf(nil, `{"order":%d}`, i)})
	}
	var first wsMessage
	audit.recv(t, &first)

	dir := artifactDir(t)
	b := newBrowser(t, exe, 90*time.Second)
	b.do("open the console", chromedp.Navigate(n.HTTPURL()+"/"))

	// The topic list shows the topic with its three partitions.
	b.wait("the topic's row", 15*time.Second,
		`(name) => [...document.querySelectorAll('#topics tr[data-topic]')].some((r) => r.dataset.topic.endsWith('/' + name))`, topic)
	row := fmt.Sprintf(`document.querySelector('#topics tr[data-topic$="/%s"]')`, topic)
	if got := eval[string](b, row+`.querySelector('a.topic-name').textContent`); got != topic {
		t.Fatalf("row name %q, want %q", got, topic)
	}
	if got := eval[string](b, row+`.cells[1].textContent`); got != "3" {
		t.Fatalf("row partitions %q, want 3", got)
	}
	b.wait("the node in the top bar", 10*time.Second, `() => document.getElementById('node-info').textContent.includes('node-1')`)
	// Rates need two samples: a later refresh fills them in.
	b.wait("the topic's rates", 10*time.Second,
		`(name) => { const r = document.querySelector('#topics tr[data-topic$="/' + name + '"]'); return r && r.cells[2].textContent !== '—' }`, topic)
	b.noErrors("topic list")
	b.screenshot(dir, "console-topics.png")

	// The topic's page: partitions, the subscription and a live tail.
	b.do("open the topic", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#topics tr[data-topic$="/%s"] a.topic-name`, topic))))
	b.wait("the tail to connect", 15*time.Second, `() => document.querySelector('#tail-status[data-state="live"]') !== null`)
	b.wait("three partitions and the audit subscription", 15*time.Second,
		`() => document.querySelectorAll('#topic-detail tr[data-partition]').length === 3 && document.querySelector('#topic-detail tr[data-subscription="audit"]') !== null`)
	// The console's own reader shows among the subscriptions once the
	// next refresh has seen it.
	b.wait("the tail's reader among the subscriptions", 10*time.Second,
		`() => [...document.querySelectorAll('#topic-detail tr[data-subscription]')].some((r) => r.dataset.subscription.startsWith('reader-'))`)

	// Markup in a payload must show as text, never become elements.
	payload := fmt.Sprintf(`tern console e2e %d <b id="injected">bold</b> & "quoted"`, time.Now().UnixNano())
	produce(&kgo.Record{Key: []byte("order-42"), Value: []byte(payload), Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("e2e")}}})
	b.wait("the tail to show the message", 20*time.Second,
		`(want) => [...document.querySelectorAll('#tail-list .tail-payload')].some((p) => p.textContent === want)`, payload)
	if got := eval[int](b, `document.querySelectorAll('#tail-list .tail-row').length`); got != 1 {
		t.Errorf("the tail shows %d messages, want 1 (it starts at the latest message)", got)
	}
	if eval[bool](b, `document.getElementById('injected') !== null`) {
		t.Fatal("a payload's markup became an element")
	}
	if got := eval[string](b, `document.querySelector('#tail-list .tail-row .key-chip').textContent`); got != "order-42" {
		t.Errorf("tail key %q, want order-42", got)
	}
	if got := eval[string](b, `document.querySelector('#tail-list .tail-row .tail-meta .badge').title`); got != "source=e2e" {
		t.Errorf("tail properties %q, want source=e2e", got)
	}
	// The row opens to show the message's details.
	b.do("open the message", chromedp.Click(chromedp.CSS(`#tail-list .tail-row .tail-payload`)))
	b.wait("the message's details", 5*time.Second,
		`(want) => { const d = document.querySelector('#tail-list .tail-detail'); return d && d.querySelector('pre').textContent === want && d.textContent.includes('source') }`, payload)
	// Paused, the tail holds what arrives; resumed, it shows it on top.
	b.do("pause the tail", chromedp.Click(chromedp.CSS(`#tail-pause`)))
	second := fmt.Sprintf("second message %d", time.Now().UnixNano())
	produce(&kgo.Record{Key: []byte("order-43"), Value: []byte(second)})
	b.wait("the tail to hold the second message", 20*time.Second, `() => document.getElementById('tail-count').textContent.includes('1 held')`)
	if got := eval[int](b, `document.querySelectorAll('#tail-list .tail-row').length`); got != 1 {
		t.Fatalf("the paused tail shows %d messages, want 1", got)
	}
	b.do("resume the tail", chromedp.Click(chromedp.CSS(`#tail-pause`)))
	b.wait("the second message on top", 5*time.Second,
		`(want) => { const p = document.querySelector('#tail-list .tail-payload'); return p && p.textContent === want && document.querySelectorAll('#tail-list .tail-row').length === 2 }`, second)
	b.noErrors("topic view")
	b.screenshot(dir, "console.png")
	// The theme switch flips the page to dark and back.
	dark := eval[string](b, `document.documentElement.dataset.theme`) == "light"
	b.do("switch the theme", chromedp.Click(chromedp.CSS(`#theme`)))
	if got := eval[string](b, `document.documentElement.dataset.theme`); (got == "dark") != dark {
		t.Fatalf("theme %q after the switch", got)
	}
	b.screenshot(dir, "console-"+map[bool]string{true: "dark", false: "light"}[dark]+".png")
	b.do("switch the theme back", chromedp.Click(chromedp.CSS(`#theme`)))

	// The mesh view lists both regions and their nodes.
	b.do("open the mesh view", chromedp.Click(chromedp.CSS(`#nav a[data-view="mesh"]`)))
	b.wait("both regions", 15*time.Second,
		`() => document.querySelector('[data-region="eu-west"] tr[data-node="node-1"]') !== null && document.querySelector('[data-region="us-east"] tr[data-node="node-2"]') !== null`)
	// Leaving the topic closed the tail's socket, and the reader with it.
	testcluster.WaitFor(t, 10*time.Second, "the tail's reader session to close", func() bool {
		return n.Proxy().WebSocket().Metrics().Readers == 0
	})
	b.noErrors("mesh view")
	b.screenshot(dir, "console-mesh.png")

	// A hash that names no view, or that is not escaped correctly, gets a
	// page that says so.
	for _, hash := range []string{"#/nope", "#/topics/%E0%A4%A/x/y"} {
		b.do("open "+hash, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = %q`, hash)))
		b.wait("the not-found page for "+hash, 5*time.Second, `(h) => location.hash === h && document.getElementById('main').textContent.includes('Nothing at')`, hash)
	}
	b.noErrors("unknown views")
}
