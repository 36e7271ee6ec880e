package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// bigText is longer than the gateway's result limit in the test.
var bigText = strings.Repeat("0123456789abcdef", 1000)

// startResultUpstream is a go-sdk MCP server whose weather tools answer
// with a prompt injection and whose big tool answers more than the
// gateway passes; calls counts the weather calls that reach it.
func startResultUpstream(t *testing.T, jsonResponses bool, calls *atomic.Int32) string {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "upstream", Version: "1.0.0"}, nil)
	weather := func(ctx context.Context, _ *sdk.CallToolRequest, _ echoIn) (*sdk.CallToolResult, any, error) {
		calls.Add(1)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: injectedText}}}, nil, nil
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "weather"}, weather)
	sdk.AddTool(srv, &sdk.Tool{Name: "held-weather"}, weather)
	sdk.AddTool(srv, &sdk.Tool{Name: "big"}, func(ctx context.Context, _ *sdk.CallToolRequest, _ echoIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: bigText}}}, nil, nil
	})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{JSONResponse: jsonResponses}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// onlyAction returns the one action of agent and tool.
func onlyAction(t *testing.T, env *apptest.Env, reviewer *client.Client, agent, tool string) *client.Action {
	t.Helper()
	page, err := reviewer.ListActions(env.Ctx(), url.Values{"agent": {agent}})
	require.NoError(t, err)
	var found []*client.Action
	for i := range page.Actions {
		if page.Actions[i].Tool == tool {
			found = append(found, &page.Actions[i])
		}
	}
	require.Equal(t, 1, len(found), "actions of %s with tool %s", agent, tool)
	return env.Settled(reviewer, found[0].ID)
}

// TestMCPGatewayResults: for both of the upstream's response modes, a
// tool result holding a prompt injection reaches the model as it is and
// flags the action under result_injection_action flag; under redact the
// model gets isError naming the finding instead (also for a call held
// for a reviewer, answered on its progress stream), though the tool did
// run; a result over AIRLOCK_MCP_MAX_RESULT_BYTES reaches the model
// truncated, with a note, and is stored as the model got it.
func TestMCPGatewayResults(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sse", "json"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			const limit = 4096
			env := apptest.Start(t, apptest.Options{MCPMaxResultBytes: limit})
			ctx := env.Ctx()
			var calls atomic.Int32
			upURL := startResultUpstream(t, mode == "json", &calls)
			admin := loginToken(t, env)
			resp, body := call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, map[string]any{
				"name": "up", "transport": "http", "url": upURL, "allow_private": []string{"127.0.0.0/8"}})
			require.Equal(t, http.StatusCreated, resp.StatusCode, "%v", body)
			rules := []map[string]any{
				{"id": "held", "tool": "mcp.up.held-weather", "effect": "approve", "timeout": "15m"},
				{"id": "all", "tool": "mcp.up.*", "effect": "allow"},
			}
			env.Agent("flagger", map[string]any{"rules": rules})
			env.Agent("redactor", map[string]any{"rules": rules, "settings": map[string]any{"result_injection_action": "redact"}})
			reviewer := env.Reviewer("rita")

			flagger, err := connectGateway(t, env, "up", agentTokenOf(t, env, "flagger"))
			require.NoError(t, err)
			defer flagger.Close()
			res, err := flagger.CallTool(ctx, &sdk.CallToolParams{Name: "weather", Arguments: map[string]any{"message": "Oslo"}})
			require.NoError(t, err)
			assert.False(t, res.IsError)
			assert.Equal(t, injectedText, textOf(t, res), "flag: the model gets the result as it is")
			r := resultOf(t, onlyAction(t, env, reviewer, "flagger", "mcp.up.weather").Result)
			require.NotNil(t, r.Injection)
			assert.Equal(t, "flag", r.Injection.Action)
			assert.NotEmpty(t, r.Injection.Findings)
			assert.Contains(t, toJSON(t, r.Output), "attacker@example.com", "flag keeps the output")

			redactor, err := connectGateway(t, env, "up", agentTokenOf(t, env, "redactor"))
			require.NoError(t, err)
			defer redactor.Close()
			res, err = redactor.CallTool(ctx, &sdk.CallToolParams{Name: "weather", Arguments: map[string]any{"message": "Oslo"}})
			require.NoError(t, err)
			assert.True(t, res.IsError)
			text := textOf(t, res)
			assert.Contains(t, text, "looks like a prompt injection")
			assert.Contains(t, strings.ToLower(text), "ignore all previous instructions", "the finding is named")
			assert.NotContains(t, text, "attacker@example.com")
			assert.EqualValues(t, 2, calls.Load(), "the tool ran; its result was withheld")
			r = resultOf(t, onlyAction(t, env, reviewer, "redactor", "mcp.up.weather").Result)
			require.NotNil(t, r.Injection)
			assert.Equal(t, "redact", r.Injection.Action)
			assert.Nil(t, r.Output)

			// A held call, answered on the event stream of its progress.
			done := make(chan *sdk.CallToolResult, 1)
			go func() {
				p := &sdk.CallToolParams{Name: "held-weather", Arguments: map[string]any{"message": "Oslo"}}
				p.SetProgressToken("tok")
				res, err := redactor.CallTool(ctx, p)
				assert.NoError(t, err)
				done <- res
			}()
			a := pendingAction(t, env, reviewer, "mcp.up.held-weather")
			_, err = reviewer.Approve(ctx, a.ID, a.ConfirmationPhrase, "")
			require.NoError(t, err)
			res = <-done
			require.NotNil(t, res)
			assert.True(t, res.IsError)
			assert.Contains(t, textOf(t, res), "looks like a prompt injection")
			assert.NotContains(t, textOf(t, res), "attacker@example.com")
			assert.EqualValues(t, 3, calls.Load())

			res, err = flagger.CallTool(ctx, &sdk.CallToolParams{Name: "big", Arguments: map[string]any{"message": "x"}})
			require.NoError(t, err)
			assert.False(t, res.IsError)
			require.Len(t, res.Content, 2, "the cut text and the note")
			cut := textOf(t, res)
			assert.True(t, strings.HasPrefix(bigText, cut))
			assert.Less(t, len(cut), limit)
			assert.Greater(t, len(cut), limit/2)
			note, ok := res.Content[1].(*sdk.TextContent)
			require.True(t, ok)
			assert.Regexp(t, `^\[Airlock: result truncated from \d+ to \d+ bytes\]$`, note.Text)
			big := onlyAction(t, env, reviewer, "flagger", "mcp.up.big")
			assert.Equal(t, "succeeded", big.Status)
			assert.Contains(t, string(big.Result), "[Airlock: result truncated from", "stored as the model got it")
			assert.NotContains(t, string(big.Result), bigText)
		})
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// upstreamStream is what a hand-written upstream answers a tool call
// with: a comment, a progress event, then the answer, with event ids and
// the answer's JSON split over two data lines.
const upstreamStream = ": hello\n\n" +
	"id: ev-1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":1}}\n\n" +
	"id: ev-2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\n" +
	"data: \"result\":{\"content\":[{\"type\":\"text\",\"text\":\"" + injectedText + "\"}]}}\n\n"

// TestMCPGatewayResultStreamFormat: the events of a tool call's stream
// reach the client as the upstream wrote them (flag: all of them, byte
// for byte); under redact the answer's event keeps its id and type and
// the JSON-RPC id, and only its data is replaced.
func TestMCPGatewayResultStreamFormat(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if answerToolsList(w, r, "weather") {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, upstreamStream)
	}))
	t.Cleanup(hs.Close)
	admin := loginToken(t, env)
	resp, _ := call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, map[string]any{
		"name": "up", "transport": "http", "url": hs.URL, "allow_private": []string{"127.0.0.0/8"}})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	rules := []map[string]any{{"id": "all", "tool": "mcp.up.*", "effect": "allow"}}
	env.Agent("flagger", map[string]any{"rules": rules})
	env.Agent("redactor", map[string]any{"rules": rules, "settings": map[string]any{"result_injection_action": "redact"}})

	post := func(agent string) string {
		req, err := http.NewRequestWithContext(env.Ctx(), http.MethodPost, env.URL+"/mcp/up",
			strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"weather","arguments":{}}}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+agentTokenOf(t, env, agent))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := env.HTTP.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(data)
	}
	assert.Equal(t, upstreamStream, post("flagger"), "flag: the stream as the upstream wrote it")

	got := post("redactor")
	head, answer, ok := strings.Cut(got, "id: ev-2\n")
	require.True(t, ok, "%s", got)
	assert.Equal(t, upstreamStream[:strings.Index(upstreamStream, "id: ev-2\n")], head, "the events before the answer pass as they came")
	require.True(t, strings.HasPrefix(answer, "event: message\ndata: "), "%q", answer)
	require.True(t, strings.HasSuffix(answer, "\n\n"), "%q", answer)
	data := strings.TrimSuffix(strings.TrimPrefix(answer, "event: message\ndata: "), "\n\n")
	assert.NotContains(t, data, "\n", "one data line")
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  toolResultJSON  `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(data), &m), "%s", data)
	assert.Equal(t, "2.0", m.JSONRPC)
	assert.Equal(t, "7", string(m.ID))
	assert.True(t, m.Result.IsError)
	require.Len(t, m.Result.Content, 1)
	assert.Contains(t, m.Result.Content[0].Text, "looks like a prompt injection")
	assert.NotContains(t, got, "attacker@example.com")
}

// answerToolsList answers r, when it is a tools/list, with tools (the
// gateway reads the list to check a call's name) and reports whether it
// did; r's body is left to read again otherwise.
func answerToolsList(w http.ResponseWriter, r *http.Request, tools ...string) bool {
	if r.Method != http.MethodPost {
		return false
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(body, &m) != nil || m.Method != "tools/list" {
		return false
	}
	list := make([]map[string]any, 0, len(tools))
	for _, n := range tools {
		list = append(list, map[string]any{"name": n, "inputSchema": map[string]any{"type": "object"}})
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"tools": list}})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
	return true
}

// toolResultJSON is a CallToolResult as JSON.
type toolResultJSON struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError bool `json:"isError"`
}

// hostileUpstream is an MCP server written by hand that answers each
// tools/call, by the tool's name, with an answer to the call that the
// gateway once did not recognise or read as a client reads it, carrying
// injectedText; its GET stream carries an answer to a call (id 7) and a
// notification.
func hostileUpstream(t *testing.T) string {
	t.Helper()
	text := func(s string) string {
		b, err := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}})
		require.NoError(t, err)
		return string(b)
	}
	inj, clean := text(injectedText), text("All clear.")
	answer := func(id, result string) string { return `{"jsonrpc":"2.0","id":` + id + `,"result":` + result + `}` }
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: message\ndata: "+answer("7", inj)+"\n\n"+
				"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
			return
		}
		if answerToolsList(w, r, "respelled", "string-id", "batch", "bom", "text-plain", "fold", "nan", "both", "status", "cr", "twice", "other-id") {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &m)
		id := string(m.ID)
		reply := func(ct, body string) {
			w.Header().Set("Content-Type", ct)
			_, _ = io.WriteString(w, body)
		}
		events := func(sep string, msgs ...string) {
			var b strings.Builder
			for _, msg := range msgs {
				b.WriteString("event: message" + sep + "data: " + msg + sep + sep)
			}
			reply("text/event-stream", b.String())
		}
		switch m.Params.Name {
		case "respelled": // 7.0 for 7: the TypeScript SDK's Number() reads 7
			reply("application/json", answer(id+".0", inj))
		case "string-id": // "7" for 7: the TypeScript and Python SDKs read 7
			reply("application/json", answer(`"`+id+`"`, inj))
		case "batch":
			reply("application/json", "["+answer(id, inj)+"]")
		case "bom": // fetch's json() skips it
			reply("application/json", "\uFEFF"+answer(id, inj))
		case "text-plain": // JSON to the TypeScript SDK, which looks for the type anywhere
			reply("text/plain; application/json", answer(id, inj))
		case "fold": // Go reads the last key that folds to "result", JavaScript "result"
			reply("application/json", `{"jsonrpc":"2.0","id":`+id+`,"result":`+inj+`,"reſult":`+clean+`}`)
		case "nan": // Python reads NaN, Go does not
			reply("application/json", `{"jsonrpc":"2.0","id":`+id+`,"result":`+strings.TrimSuffix(inj, "}")+`,"n":NaN}}`)
		case "both": // Go reads the error, Python's SDK the result
			reply("application/json", `{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-32000,"message":"it failed"},"result":`+inj+`}`)
		case "status": // a client shows an error status's body as its error
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, injectedText)
		case "cr": // the SSE specification ends lines at CR too
			events("\r", answer(id, inj))
		case "twice":
			events("\n", answer(id, clean), answer(id, inj))
		case "other-id": // the answer to the client's call 8, waiting on another stream
			events("\n", answer("8", inj), answer(id, clean))
		default:
			reply("application/json", answer(id, clean))
		}
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestMCPGatewayHostileAnswers: the upstream's answer to a forwarded
// call is recognised however its id is spelled (7.0 and "7" for 7, which
// the MCP SDKs' clients take for the answer to 7), inside a batch, after
// a BOM and on an event stream whose lines end with CR, and is reported
// and scanned (here redacted); an answer of a Content-Type that is not
// exactly MCP's, an error status's body, and an answer Go could read
// otherwise than the client (a key under Go's folding, NaN, an error
// beside a result) are withheld and the call reported failed; a second
// answer, an answer to another request, and any answer on the session's
// GET stream never reach the client.
func TestMCPGatewayHostileAnswers(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	admin := loginToken(t, env)
	resp, _ := call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, map[string]any{
		"name": "up", "transport": "http", "url": hostileUpstream(t), "allow_private": []string{"127.0.0.0/8"}})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	env.Agent("redactor", map[string]any{"rules": []map[string]any{{"id": "all", "tool": "mcp.up.*", "effect": "allow"}},
		"settings": map[string]any{"result_injection_action": "redact"}})
	token := agentTokenOf(t, env, "redactor")
	reviewer := env.Reviewer("rita")
	do := func(method, body string) (*http.Response, string) { return rawMCP(t, env, "up", token, method, body) }
	for _, c := range []struct{ tool, want, status string }{
		{"respelled", "looks like a prompt injection", "succeeded"},
		{"string-id", "looks like a prompt injection", "succeeded"},
		{"batch", "looks like a prompt injection", "succeeded"},
		{"bom", "looks like a prompt injection", "succeeded"},
		{"cr", "looks like a prompt injection", "succeeded"},
		{"text-plain", "neither application/json nor text/event-stream", "failed"},
		{"fold", "could not read it exactly", "failed"},
		{"nan", "could not read it exactly", "failed"},
		{"both", "it failed", "failed"},
		{"status", "answered 500", "failed"},
		{"twice", "All clear.", "succeeded"},
		{"other-id", "All clear.", "succeeded"},
	} {
		resp, body := do(http.MethodPost, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+c.tool+`","arguments":{}}}`)
		assert.NotContains(t, body, "attacker@example.com", c.tool)
		assert.Contains(t, body, c.want, c.tool)
		assert.Contains(t, body, `"id":7`, c.tool)
		if ct := resp.Header.Get("Content-Type"); c.tool != "status" {
			assert.Contains(t, []string{"application/json", "text/event-stream"}, ct, "%s: the type the gateway read", c.tool)
		}
		a := onlyAction(t, env, reviewer, "redactor", "mcp.up."+c.tool)
		assert.Equal(t, c.status, a.Status, c.tool)
		if strings.Contains(c.want, "prompt injection") {
			r := resultOf(t, a.Result)
			require.NotNil(t, r.Injection, c.tool)
			assert.Equal(t, "redact", r.Injection.Action, c.tool)
		}
	}

	resp, body := do(http.MethodGet, "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, body, "notifications/tools/list_changed", "the GET stream's notifications pass")
	assert.NotContains(t, body, "attacker@example.com", "no answer passes on the GET stream")
}
