package httpapi_test

import (
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestPolicyChangeOnAnotherInstanceAppliesAtOnce: an instance decides
// submits on the policy versions it cached, so a change made through
// another instance must still apply to the very next submit (the insert's
// guard refuses the stale decision and it is made again), and the refused
// attempt leaves nothing behind.
func TestPolicyChangeOnAnotherInstanceAppliesAtOnce(t *testing.T) {
	t.Parallel()
	one := apptest.Start(t)
	two := apptest.Start(t, apptest.Options{DatabaseURL: one.DBURL, DataDir: one.Config.DataDir})
	ctx := one.Ctx()
	agent := one.Agent("cached", map[string]any{"rules": []map[string]any{
		{"id": "reads", "tool": "fs.read", "effect": "allow"},
	}})
	first, err := agent.Submit(ctx, clientReq("fs.read"))
	require.NoError(t, err)
	require.Equal(t, "approved", first.Status)
	require.Equal(t, 1, first.Decision.PolicyVersion)

	// The agent's policy, changed through the other instance.
	_, err = two.Admin.PutAgentPolicy(ctx, "cached", map[string]any{"rules": []map[string]any{
		{"id": "no-reads", "tool": "fs.read", "effect": "deny"},
	}})
	require.NoError(t, err)
	second, err := agent.Submit(ctx, clientReq("fs.read"))
	require.NoError(t, err)
	assert.Equal(t, "denied", second.Status)
	assert.Equal(t, "no-reads", second.Decision.RuleID)
	assert.Equal(t, 2, second.Decision.PolicyVersion)

	// The fleet policy, changed through the other instance: a fleet deny
	// beats the agent's rules.
	_, err = two.Admin.PutAgentPolicy(ctx, "cached", map[string]any{"rules": []map[string]any{
		{"id": "reads-again", "tool": "fs.read", "effect": "allow"},
	}})
	require.NoError(t, err)
	third, err := agent.Submit(ctx, clientReq("fs.read"))
	require.NoError(t, err)
	require.Equal(t, "approved", third.Status)
	_, err = two.Admin.PutFleetPolicy(ctx, map[string]any{"rules": []map[string]any{
		{"id": "fleet-no-reads", "tool": "fs.read", "effect": "deny"},
	}})
	require.NoError(t, err)
	fourth, err := agent.Submit(ctx, clientReq("fs.read"))
	require.NoError(t, err)
	assert.Equal(t, "denied", fourth.Status)
	assert.Equal(t, "fleet-no-reads", fourth.Decision.RuleID)
	assert.Equal(t, "fleet", fourth.Decision.Source)

	// One action and one submit event per request: the refused decisions
	// wrote nothing.
	auditor := one.Auditor("audrey")
	page, err := auditor.ListActions(ctx, url.Values{"agent": {"cached"}})
	require.NoError(t, err)
	assert.Len(t, page.Actions, 4)
	events, err := auditor.Audit(ctx, url.Values{"agent": {"cached"}, "kind": {"action.submitted"}})
	require.NoError(t, err)
	assert.Len(t, events.Events, 4)
}

// TestConcurrentSubmitsWhilePolicyChanges hammers one instance with submits
// while another keeps rewriting the agent's policy. Every stored decision
// names the policy version it was made on and that version's rule, and no
// decision rests on a version older than one whose change had completed
// before the submit began (the cached policy is never stale past a
// request's start).
func TestConcurrentSubmitsWhilePolicyChanges(t *testing.T) {
	t.Parallel()
	one := apptest.Start(t)
	two := apptest.Start(t, apptest.Options{DatabaseURL: one.DBURL, DataDir: one.Config.DataDir})
	ctx := one.Ctx()
	// Odd versions allow, even versions deny.
	allow := map[string]any{"rules": []map[string]any{{"id": "allow", "tool": "fs.read", "effect": "allow"}}}
	deny := map[string]any{"rules": []map[string]any{{"id": "deny", "tool": "fs.read", "effect": "deny"}}}
	agent := one.Agent("churn", allow)

	type submitted struct {
		started time.Time
		action  *client.Action
	}
	type changed struct {
		done    time.Time
		version int
	}
	const submitters, each, rewrites = 8, 15, 10
	var wg sync.WaitGroup
	results := make(chan submitted, submitters*each)
	changes := make(chan changed, rewrites)
	errs := make(chan error, submitters*each+rewrites)
	for range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				started := time.Now()
				a, err := agent.Submit(ctx, clientReq("fs.read"))
				if err != nil {
					errs <- err
					continue
				}
				results <- submitted{started, a}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range rewrites {
			doc := deny
			if i%2 == 1 {
				doc = allow
			}
			pv, err := two.Admin.PutAgentPolicy(ctx, "churn", doc)
			if err != nil {
				errs <- err
				continue
			}
			changes <- changed{time.Now(), pv.Version}
		}
	}()
	wg.Wait()
	close(results)
	close(changes)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var done []changed
	for c := range changes {
		done = append(done, c)
	}
	n := 0
	for r := range results {
		n++
		a := r.action
		want := map[bool]string{true: "allow", false: "deny"}[a.Decision.PolicyVersion%2 == 1]
		assert.Equal(t, want, a.Decision.RuleID, "action %s decided on v%d", a.ID, a.Decision.PolicyVersion)
		for _, c := range done {
			if c.done.Before(r.started) {
				assert.GreaterOrEqual(t, a.Decision.PolicyVersion, c.version,
					"action %s began after v%d was in place but was decided on v%d", a.ID, c.version, a.Decision.PolicyVersion)
			}
		}
	}
	assert.Equal(t, submitters*each, n)
}
