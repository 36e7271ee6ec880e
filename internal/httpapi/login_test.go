package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/identity"
)

// loopback trusts the test's own requests as a proxy's.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// loginAnswer is what POST /api/v1/auth/login answered.
type loginAnswer struct {
	status     int
	code       string
	retryAfter string
}

// tryLogin sends one login, with X-Forwarded-For xff when not empty.
func tryLogin(t *testing.T, env *apptest.Env, username, password, xff string) loginAnswer {
	t.Helper()
	return sendForAnswer(t, env, http.MethodPost, "/api/v1/auth/login", "", xff,
		map[string]string{"username": username, "password": password})
}

// sendForAnswer sends body as JSON to path, with token and X-Forwarded-For
// xff when not empty, and reads the status, error code and Retry-After.
func sendForAnswer(t *testing.T, env *apptest.Env, method, path, token, xff string, body any) loginAnswer {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(env.Ctx(), method, env.URL+path, bytes.NewReader(data))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	resp, err := env.HTTP.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return loginAnswer{status: resp.StatusCode, code: out.Error.Code, retryAfter: resp.Header.Get("Retry-After")}
}

// login is tryLogin that waits out a busy hashing gate (503: nothing was
// counted), for tests whose parallel neighbours hash too.
func login(t *testing.T, env *apptest.Env, username, password, xff string) loginAnswer {
	t.Helper()
	for {
		a := tryLogin(t, env, username, password, xff)
		if a.status != http.StatusServiceUnavailable {
			return a
		}
		require.NotEmpty(t, a.retryAfter, "a 503 says when to come back")
		time.Sleep(100 * time.Millisecond)
	}
}

// requireRateLimited checks a 429 with a Retry-After within the window.
func requireRateLimited(t *testing.T, a loginAnswer, msg string) {
	t.Helper()
	require.Equal(t, http.StatusTooManyRequests, a.status, msg)
	assert.Equal(t, "rate_limited", a.code, msg)
	secs, err := strconv.Atoi(a.retryAfter)
	require.NoError(t, err, "Retry-After %q", a.retryAfter)
	assert.True(t, secs >= 1 && secs <= int(identity.LoginWindow/time.Second), "Retry-After %d within the window", secs)
}

// TestLoginFailuresArePerUsernameAndAddress: failures for one username do
// not lock another user out from the same address (the old limiter counted
// 10 attempts per address, all users together, and counted successes).
func TestLoginFailuresArePerUsernameAndAddress(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	for i := range identity.LoginFailuresPerUser {
		name := []string{"mallory", "Mallory", "MALLORY"}[i%3] // one username in any case
		a := login(t, env, name, "not-the-password", "")
		require.Equal(t, http.StatusUnauthorized, a.status, "failure %d", i+1)
	}
	requireRateLimited(t, login(t, env, "mallory", "not-the-password", ""), "the 11th failure for mallory")

	a := login(t, env, "admin", apptest.AdminPassword, "")
	require.Equal(t, http.StatusOK, a.status, "admin still logs in from the same address")
	requireRateLimited(t, login(t, env, "mallory", "not-the-password", ""), "a success of another user resets nothing")
	require.Equal(t, http.StatusUnauthorized, login(t, env, "admin", "wrong-password-1", "").status,
		"admin's own failures are counted apart from mallory's")
}

// TestLoginSuccessesAreNotCounted: only failures count towards the limit
// (the old limiter refused the 11th success within a minute).
func TestLoginSuccessesAreNotCounted(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	env.Reviewer("rita")
	for i := range 2 * identity.LoginFailuresPerUser {
		require.Equal(t, http.StatusOK, login(t, env, "rita", "rita-password-123", "").status, "success %d", i+1)
	}
	for i := range identity.LoginFailuresPerUser {
		require.Equal(t, http.StatusUnauthorized, login(t, env, "rita", "wrong-password-1", "").status, "failure %d", i+1)
	}
	requireRateLimited(t, login(t, env, "rita", "wrong-password-1", ""), "the 11th failure")
	requireRateLimited(t, login(t, env, "rita", "rita-password-123", ""), "at the limit even the right password waits")
}

// The bound per address across usernames is tested on the identity
// service with a stopped clock (identity.TestFailuresPerAddress): 100
// argon2id checks can take more than the minute they are counted in on a
// busy test machine.

// TestTrustedProxies: X-Forwarded-For names the client only when the peer
// (here loopback) is a trusted proxy.
func TestTrustedProxies(t *testing.T) {
	t.Parallel()
	t.Run("untrusted peer cannot spoof", func(t *testing.T) {
		t.Parallel()
		env := apptest.Start(t)
		for i := range identity.LoginFailuresPerUser {
			a := login(t, env, "mallory", "not-the-password", fmt.Sprintf("198.51.100.%d", i+1))
			require.Equal(t, http.StatusUnauthorized, a.status)
		}
		requireRateLimited(t, login(t, env, "mallory", "not-the-password", "198.51.100.200"),
			"a new X-Forwarded-For from an untrusted peer is the same client")
		assert.Equal(t, "127.0.0.1", lastFailedLoginIP(t, env), "the audit names the peer")
	})
	t.Run("trusted peer's header names the client", func(t *testing.T) {
		t.Parallel()
		env := apptest.Start(t, apptest.Options{TrustedProxies: loopback})
		for range identity.LoginFailuresPerUser {
			// The client claims 10.0.0.1; the trusted proxy appended what it saw.
			require.Equal(t, http.StatusUnauthorized, login(t, env, "mallory", "not-the-password", "10.0.0.1, 198.51.100.1").status)
		}
		assert.Equal(t, "198.51.100.1", lastFailedLoginIP(t, env), "the right-most untrusted address is the client")
		requireRateLimited(t, login(t, env, "mallory", "not-the-password", "10.0.0.9, 198.51.100.1"), "same client")
		assert.Equal(t, http.StatusUnauthorized, login(t, env, "mallory", "not-the-password", "198.51.100.2").status,
			"another client behind the proxy has its own count")
		assert.Equal(t, http.StatusUnauthorized, login(t, env, "mallory", "not-the-password", "").status,
			"the proxy's own requests (no header) count apart too")
	})
}

// lastFailedLoginIP is the ip of the newest auth.login_failed event.
func lastFailedLoginIP(t *testing.T, env *apptest.Env) string {
	t.Helper()
	var out struct {
		Events []struct {
			Kind string         `json:"kind"`
			Data map[string]any `json:"data"`
		} `json:"events"`
	}
	_, err := env.Admin.Do(env.Ctx(), http.MethodGet, "/api/v1/audit?kind=auth.login_failed", nil, &out)
	require.NoError(t, err)
	require.NotEmpty(t, out.Events)
	ip, _ := out.Events[len(out.Events)-1].Data["ip"].(string)
	return ip
}

// TestConcurrentWrongLoginsBoundedMemory: 100 wrong logins at once, each
// from its own address (so the limits let all of them try), keep the
// process (the server runs in it) under 512 MiB resident: the argon2id gate
// runs a few at once and refuses the rest with 503 and Retry-After. Every
// answer is 401, 429 or 503, never 500. Not parallel: it measures the
// process.
func TestConcurrentWrongLoginsBoundedMemory(t *testing.T) {
	env := apptest.Start(t, apptest.Options{TrustedProxies: loopback})
	before, _ := procStatus(t, "VmRSS")
	t.Logf("resident before: %d MiB", before>>20)
	peak := watchPeakRSS(t)

	const n = 100
	answers := make([]loginAnswer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			answers[i] = tryLogin(t, env, fmt.Sprintf("guess-%d", i), "not-the-password", fmt.Sprintf("198.51.%d.%d", 100+i/250, 1+i%250))
		})
	}
	close(start)
	wg.Wait()

	counts := map[int]int{}
	for i, a := range answers {
		counts[a.status]++
		switch a.status {
		case http.StatusUnauthorized:
		case http.StatusServiceUnavailable:
			assert.Equal(t, "unavailable", a.code, "answer %d", i)
			assert.NotEmpty(t, a.retryAfter, "answer %d: a 503 carries Retry-After", i)
		case http.StatusTooManyRequests:
			assert.NotEmpty(t, a.retryAfter, "answer %d: a 429 carries Retry-After", i)
		default:
			t.Errorf("answer %d: status %d, want 401, 429 or 503", i, a.status)
		}
	}
	assert.Positive(t, counts[http.StatusUnauthorized], "some passwords were checked: %v", counts)
	mib := peak() >> 20
	t.Logf("answers %v, peak resident memory %d MiB", counts, mib)
	assert.Less(t, mib, uint64(512), "peak resident memory of the process")
}

// watchPeakRSS starts measuring the process's peak resident memory and
// returns a function that reports it in bytes: VmHWM after resetting it
// (writing 5 to /proc/self/clear_refs), or, where that is refused, the
// highest VmRSS sampled until the function is called.
func watchPeakRSS(t *testing.T) func() uint64 {
	t.Helper()
	_, err := procStatus(t, "VmHWM")
	require.NoError(t, err, "reading /proc/self/status")
	if os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil {
		return func() uint64 {
			v, err := procStatus(t, "VmHWM")
			require.NoError(t, err)
			return v
		}
	}
	var mu sync.Mutex
	var peak uint64
	sample := func() {
		v, err := procStatus(t, "VmRSS")
		if err == nil {
			mu.Lock()
			peak = max(peak, v)
			mu.Unlock()
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			sample()
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		sample()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// procStatus reads one "kB" field of /proc/self/status, in bytes.
func procStatus(t *testing.T, field string) (uint64, error) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}

// holdPasswordSlots takes every slot of the process's hashing gate until
// the returned function is called. Tests that use it are not parallel: no
// other test may need a slot meanwhile.
func holdPasswordSlots(t *testing.T) (release func()) {
	t.Helper()
	var slots []*auth.PasswordSlot
	for range auth.PasswordSlots() {
		s, err := auth.AcquirePasswordSlot(context.Background())
		require.NoError(t, err)
		slots = append(slots, s)
	}
	release = func() {
		for _, s := range slots {
			s.Release()
		}
		slots = nil
	}
	t.Cleanup(release)
	return release
}

// TestLoginWhenHashingIsBusy: with every hashing slot taken, a login waits
// briefly and gets 503 with Retry-After; it was not counted as a failure,
// and user creation is refused the same way. Not parallel: it holds the
// process's slots.
func TestLoginWhenHashingIsBusy(t *testing.T) {
	env := apptest.Start(t)
	release := holdPasswordSlots(t)
	for range identity.LoginFailuresPerUser {
		a := tryLogin(t, env, "mallory", "not-the-password", "")
		require.Equal(t, http.StatusServiceUnavailable, a.status)
		assert.Equal(t, "unavailable", a.code)
		assert.Equal(t, "1", a.retryAfter)
	}
	err := env.Admin.CreateUser(env.Ctx(), "rita", "rita-password-123", "reviewer")
	assert.Equal(t, "unavailable", codeOf(err), "creating a user hashes too: %v", err)
	release()

	assert.Equal(t, http.StatusUnauthorized, tryLogin(t, env, "mallory", "not-the-password", "").status,
		"the refused attempts were not counted")
	assert.Equal(t, http.StatusOK, tryLogin(t, env, "admin", apptest.AdminPassword, "").status)
}

// tryPasswordChange sends PATCH /api/v1/users/{username} {password,
// current_password} with token, with X-Forwarded-For xff when not empty.
func tryPasswordChange(t *testing.T, env *apptest.Env, token, username, current, xff string) loginAnswer {
	t.Helper()
	return sendForAnswer(t, env, http.MethodPatch, "/api/v1/users/"+username, token, xff,
		map[string]string{"password": "a-brand-new-password", "current_password": current})
}

// passwordChange is tryPasswordChange that waits out a busy hashing gate.
func passwordChange(t *testing.T, env *apptest.Env, token, username, current, xff string) loginAnswer {
	t.Helper()
	for {
		a := tryPasswordChange(t, env, token, username, current, xff)
		if a.status != http.StatusServiceUnavailable {
			return a
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// failedLogins are the auth.login_failed events of actor, oldest first.
func failedLogins(t *testing.T, env *apptest.Env, actor string) []map[string]any {
	t.Helper()
	var out struct {
		Events []struct {
			Actor string         `json:"actor"`
			Data  map[string]any `json:"data"`
		} `json:"events"`
	}
	_, err := env.Admin.Do(env.Ctx(), http.MethodGet, "/api/v1/audit?kind=auth.login_failed&limit=1000", nil, &out)
	require.NoError(t, err)
	var data []map[string]any
	for _, e := range out.Events {
		if e.Actor == actor {
			data = append(data, e.Data)
		}
	}
	return data
}

// TestWrongCurrentPasswordIsLimitedLikeLogins: a session changing its own
// password cannot guess the current one without limit: each wrong guess is
// a failed login of the user from the client's address (audited as one),
// and beyond LoginFailuresPerUser the change gets login's 429 with
// Retry-After, before any password is checked or hashed: with every
// hashing slot taken it is still 429, not 503. Logins of the user from
// that address share the limit; another address and another user do not.
// Not parallel: it holds the process's hashing slots.
func TestWrongCurrentPasswordIsLimitedLikeLogins(t *testing.T) {
	env := apptest.Start(t, apptest.Options{TrustedProxies: loopback})
	rita := env.Reviewer("rita")
	env.Reviewer("bob")
	const mallory = "198.51.100.66" // whoever holds rita's stolen session
	for i := range identity.LoginFailuresPerUser {
		a := passwordChange(t, env, rita.Token(), "rita", fmt.Sprintf("guess-number-%d", i), mallory)
		require.Equal(t, http.StatusForbidden, a.status, "wrong current password %d", i+1)
	}
	requireRateLimited(t, passwordChange(t, env, rita.Token(), "rita", "guess-number-x", mallory), "the 11th wrong current password")
	requireRateLimited(t, passwordChange(t, env, rita.Token(), "rita", "rita-password-123", mallory),
		"at the limit even the right current password waits")
	requireRateLimited(t, login(t, env, "rita", "rita-password-123", mallory), "rita's logins from there share the limit")

	failed := failedLogins(t, env, "rita")
	require.Len(t, failed, identity.LoginFailuresPerUser, "every wrong current password is audited, the refused ones are not")
	assert.Equal(t, mallory, failed[0]["ip"])
	assert.Equal(t, "wrong current password", failed[0]["reason"])

	release := holdPasswordSlots(t)
	requireRateLimited(t, tryPasswordChange(t, env, rita.Token(), "rita", "guess-number-y", mallory),
		"refused before any password is hashed")
	release()

	assert.Equal(t, http.StatusOK, login(t, env, "bob", "bob-password-123", mallory).status, "another user from the same address")
	assert.Equal(t, http.StatusOK, login(t, env, "rita", "rita-password-123", "198.51.100.7").status,
		"rita from another address, with her unchanged password")
	a := passwordChange(t, env, rita.Token(), "rita", "rita-password-123", "198.51.100.7")
	assert.Equal(t, http.StatusOK, a.status, "the change from another address: %+v", a)
}
