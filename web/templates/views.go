// Package templates holds the reviewer console's pages as templ components
// and the view models they render. The handlers in internal/web fill the
// view models; the templates only format them.
package templates

//go:generate sh -c "cd ../.. && go tool templ generate"

import (
	"net/url"
	"time"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/groups"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/identity"
	"github.com/airlockhq/airlock/internal/notify"
	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/store"
)

// Page is what every page's frame needs: who is looking, what they may do,
// the form token and messages.
type Page struct {
	Title string
	// Nav names the active section: queue, agents, fleet, users, audit.
	Nav        string
	User       string
	IsAdmin    bool
	IsReviewer bool
	IsAuditor  bool
	// CSRF is the session's form token; every POST form carries it.
	CSRF string
	// Notice is a success message, Error a failure shown at the top.
	Notice string
	Error  string
	// Scripts are extra static scripts (paths under /static/) this page loads.
	Scripts []string
	// Now is when the page was rendered (for "time left").
	Now time.Time
	// Pending is the count of pending actions the page shows (the queue),
	// put in the title; PendingMore says there are more than that.
	Pending     int
	PendingMore bool
}

// LoginView is the login form.
type LoginView struct {
	Username string
	Next     string
	Error    string
	// CSRF is the login form's token (bound to a pre-session cookie).
	CSRF string
	// SSO offers "Sign in with SSO" (single sign-on is configured).
	SSO bool
}

// QueueView is the pending-actions queue.
type QueueView struct {
	Actions []hitl.Action
	// Agents are the agent ids the filter offers.
	Agents []string
	Agent  string
	Risk   string
	// Next is the cursor of the next (older) page, "" on the last one.
	Next string
	// Older is set on a page after the first (live rows arrive on the
	// first page only).
	Older bool
	// HardStops are the plan modes on and the fleet stop (the banner).
	HardStops HardStops
	// Mine: only the actions this reviewer may approve (the default for
	// reviewers); All: every pending action (?show=all).
	Mine bool
}

// QueuePageURL is the queue page at cursor, with the filters kept.
func QueuePageURL(v QueueView, cursor string) string {
	q := url.Values{}
	if v.Agent != "" {
		q.Set("agent", v.Agent)
	}
	if v.Risk != "" {
		q.Set("risk", v.Risk)
	}
	if !v.Mine {
		q.Set("show", "all")
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if len(q) == 0 {
		return "/ui/queue"
	}
	return "/ui/queue?" + q.Encode()
}

// ScopeOption is one approval scope and whether this action allows it.
type ScopeOption struct {
	Value   string
	Label   string
	Allowed bool
	// Why explains a scope that is not allowed.
	Why string
}

// ActionView is one action's page.
type ActionView struct {
	Action hitl.Action
	// Args is the pretty-printed, already redacted arguments.
	Args string
	// Result and Preview are pretty-printed, when present.
	Result  string
	Preview string
	// Builtin is set for the tools that run on worker hosts (exec,
	// worktree.*): what runs where, what came out, and the diff.
	Builtin *BuiltinView
	// CanDecide is set for reviewers while the action is pending.
	CanDecide bool
	// CanStop is set for reviewers and admins while an approved action has
	// not finished: it can still be cancelled (a running one is killed).
	CanStop bool
	// AlreadyApproved is set when this reviewer's approval is counted and
	// others must complete the quorum.
	AlreadyApproved bool
	// CannotApprove says why this reviewer may not approve the action
	// (the rule's reviewer groups, separation of duties), when they may
	// not (hitl.ApprovalProblem).
	CannotApprove string
	Scopes        []ScopeOption
	// PolicyURL links to the policy version that sent the action here.
	PolicyURL string
	// AuditLinks is set when the viewer may open the audit pages.
	AuditLinks bool
	// Injection is the graded prompt-injection finding of the result, if
	// any; ReasonFlagged says the agent's reason holds instruction-like
	// text.
	Injection     *hitl.ResultInjection
	ReasonFlagged bool
	// Budgets are the budgets matching the action, with what each has
	// left now.
	Budgets []hitl.BudgetStatus
	// Routing is the action's escalation steps and notification
	// deliveries (empty when none is configured).
	Routing hitl.ActionRouting
	// Form state kept across a refused submission.
	Scope      string
	DenyReason string
	Comment    string
	// Confirmation is the phrase as the reviewer typed it, and PhraseError
	// why it was refused; both are shown at the field.
	Confirmation string
	PhraseError  string
}

// BuiltinView shows an exec or worktree action the way a reviewer reads
// it: the command line and where it runs, the outcome, and for merges the
// exact diff (and commit) that approving would merge.
type BuiltinView struct {
	Argv      []string
	Workspace string // "workspace main" or "worktree app/wt-…"
	Network   bool
	// From the result, once the worker reported it.
	HasResult  bool
	ExitCode   int
	Stdout     string
	Stderr     string
	Truncated  bool
	DurationMS int64
	Error      string
	Branch     string
	Commit     string
	// Note says what Airlock withheld; SandboxHint, on a failed run with a
	// permission error, that the sandbox may be the cause.
	Note        string
	SandboxHint string
	// Diff is the merge preview's (or worktree.diff's) unified diff.
	Diff        []DiffLine
	DiffTitle   string
	DiffPending bool // a merge whose preview is not ready yet
	// DiffPin says what state of the files an fs.write or fs.patch
	// approval pins ("": none).
	DiffPin string
	// PendingTitle and PendingText replace the merge's words while the
	// preview of another built-in (worktree.run, fs.write, fs.patch) is
	// prepared ("": a merge).
	PendingTitle, PendingText string
	// DiffFlags name what the merge preview's diff holds that a reader
	// could miss (hitl.Preview.Flags).
	DiffFlags []string
	// Impact is an exec's impact preview (nil: none).
	Impact *ImpactView
	// Commands is a worktree.run's command set as it runs, name by name
	// (hitl.ParseCommands, not the file's YAML): what approving approves.
	// CommandsTitle says so; CommandFlags name what in it a reviewer must
	// not miss (hitl.CommandSetFlags).
	Commands      []CommandRow
	CommandsTitle string
	CommandFlags  []string
}

// CommandRow is one command of a command set: its name and the line
// `sh -c` runs; Runs marks the one this worktree.run runs.
type CommandRow struct {
	Name, Run string
	Runs      bool
}

// AgentsView lists agents, with the form to register one.
type AgentsView struct {
	Agents []identity.Agent
	// Form state kept across a refused submission.
	ID, Name, Description, Owner string
}

// IssuedToken is a token shown once, right after it was issued.
type IssuedToken struct {
	Token     string
	TokenID   string
	ExpiresAt time.Time
}

// AgentView is one agent with its tokens and policy summary.
type AgentView struct {
	Agent    identity.Agent
	Policy   *store.PolicyVersion
	Tokens   []identity.TokenInfo
	NewToken *IssuedToken
	// Overrides lists the fleet settings this agent's policy overrides.
	Overrides []policy.Override
	// SuspendedAt is when an admin suspended the agent (nil: it is not).
	SuspendedAt *time.Time
	// Grants are the agent's live conversation grants.
	Grants []hitl.Grant
	// PlanMode is the agent's and the fleet's plan mode.
	PlanMode hitl.AgentPlanMode
}

// DiffLine is one line of a line diff: Op is ' ', '+' or '-'.
type DiffLine struct {
	Op   byte
	Text string
}

// PolicyView shows a policy (agent or fleet) with its versions, one version
// and a diff between two.
type PolicyView struct {
	// Scope is "fleet" or the agent id; Base is the URL of this page.
	Scope   string
	IsFleet bool
	Base    string
	// Versions are every version, newest first.
	Versions []store.PolicyVersion
	// Shown is the version displayed and YAML its document.
	Shown *store.PolicyVersion
	YAML  string
	// From and To are the versions compared in Diff (0 when none).
	From, To int
	Diff     []DiffLine
	// Overrides (fleet page): each agent's overrides of the fleet settings.
	Overrides []AgentOverrides
	// HardStops (fleet page): plan mode and the emergency stop.
	HardStops *HardStops
	// DenyPaths and ReadOnlyPaths (fleet page): the built-in path entries
	// merged with the current fleet policy's, which every call is checked
	// against before any rule or reviewer.
	DenyPaths, ReadOnlyPaths []string
}

// AgentOverrides is one agent's overrides of the fleet settings.
type AgentOverrides struct {
	AgentID   string
	Overrides []policy.Override
}

// PolicyEditView is the YAML editor of a policy.
type PolicyEditView struct {
	Scope   string
	IsFleet bool
	Base    string
	// Action is where the form posts.
	Action string
	// BaseVersion is the version the edit started from (0: none yet).
	BaseVersion int
	YAML        string
	// Error is the validation failure, with the rule and field it names.
	Error     string
	RuleIndex int
	RuleID    string
	Field     string
	// Conflict is the version someone else saved after BaseVersion, when a
	// save was refused for it; nil otherwise.
	Conflict *store.PolicyVersion
	// ConflictBase is the version the refused edit started from.
	ConflictBase int
}

// UsersView lists users, each with the controls to change its roles,
// disable or enable it, reset its password or delete it, and the form to
// create one.
type UsersView struct {
	Users []identity.User
	// Me is the signed-in admin (its own row links to the account page).
	Me string
	// Form state kept across a refused submission.
	Username string
	Roles    map[string]bool
}

// AccountView is the signed-in user's own page: its roles and the form to
// change its password.
type AccountView struct {
	Username string
	Roles    []string
}

// AuditView is the audit search and its results.
type AuditView struct {
	CorrelationID  string
	AgentID        string
	ConversationID string
	Since, Until   string
	Kind           string
	Events         []audit.Event
	// Pager links the newest-first pages and the export.
	Pager AuditPager
	// Searched is set once a search ran.
	Searched bool
}

// TimelineView is every event of one correlation ID, in order.
type TimelineView struct {
	CorrelationID string
	Events        []audit.Event
	// More is set when the timeline was cut at the page limit.
	More bool
	// Spot is the in-place check of these events' hashes and links.
	Spot audit.SpotReport
	// Agents are the agents whose events the timeline shows, sorted: an
	// agent chooses its calls' correlation IDs, so one agent can add
	// events to another's timeline, and the page says so when it holds
	// more than one.
	Agents []string
}

// listSep is what follows item i of n in a list written out: a comma,
// or nothing after the last.
func listSep(i, n int) string {
	if i < n-1 {
		return ","
	}
	return ""
}

// ErrorView is a full-page error (403, 404, 500).
type ErrorView struct {
	Status  int
	Title   string
	Message string
}

// NotifyView is the notification targets page.
type NotifyView struct {
	// Targets are the targets, secrets redacted.
	Targets []notify.Target
	// Form keeps what a refused addition had entered (never the secret).
	Form NotifyForm
}

// NotifyForm is the add-a-target form's fields.
type NotifyForm struct {
	Name, Kind, URL, To, AllowPrivate string
}

// GroupsView is the reviewer groups page.
type GroupsView struct {
	Groups []groups.Group
	// Name and Members keep what a refused creation had entered.
	Name, Members string
}
