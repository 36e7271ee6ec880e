package risk

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// Assessment is the classifier's verdict on one tool call. Its JSON form is
// part of the HTTP API.
type Assessment struct {
	// Level is the overall risk level, always LevelForScore(Score).
	Level Level `json:"level"`
	// Score is 0–100.
	Score int `json:"score"`
	// Reasons explain the score in a stable order, most basic first (the
	// tool's category, then argument signals). Never nil.
	Reasons []string `json:"reasons"`
	// Injection is true when the prompt-injection scan found something in
	// the arguments.
	Injection bool `json:"injection"`
}

// Config tunes the classifier with fleet-wide settings. The zero value is
// usable.
type Config struct {
	// AmountCap is the amount above which a money amount in the arguments
	// raises risk; above ten times the cap the call is critical. Nil (or a
	// negative or NaN value) means 1000; zero is a cap of zero, which
	// every positive amount passes (settings.amount_cap may be 0).
	AmountCap *float64
	// AllowedHosts are hosts network destinations may go to without raising
	// risk; subdomains of an entry are allowed too. With no entries there is
	// no allowlist and a network destination only makes a call medium.
	AllowedHosts []string
}

// amountCap returns the effective cap.
func (c Config) amountCap() float64 {
	if c.AmountCap != nil && *c.AmountCap >= 0 && !math.IsNaN(*c.AmountCap) {
		return *c.AmountCap
	}
	return defaultAmountCap
}

// signalKind identifies a signal so its score counts once however often it
// fires.
type signalKind uint8

const (
	kindCategory signalKind = iota
	kindMerge
	kindForcePush
	kindAmountOver
	kindAmountFar
	kindAmountWithin
	kindRmFile
	kindRmRecursive
	kindRmRoot
	kindMkfs
	kindBlockDevice
	kindChmod
	kindGitDiscard
	kindSQLDrop
	kindSQLDeleteAll
	kindShutdown
	kindPipeShell
	kindReverseShell
	kindForkBomb
	kindSudo
	kindFindDelete
	kindShred
	kindCloudDestroy
	kindCodeLater
	kindGitPath
	kindSecretPath
	kindPrivatePath
	kindDeleteRoot
	kindRecursiveDelete
	kindHostMetadata
	kindHostInternal
	kindHostNumeric
	kindHostNotAllowed
	kindHostNoAllowlist
	kindHostUnreadable
	kindHostLookalike
	kindHostAmbiguous
	kindInjection
	kindNotScanned
	kindReadOnlyCmd
	kindHidden
	kindBidi
	numKinds
)

// group orders reasons: all reasons of one group come before the next.
type group uint8

const (
	groupCategory group = iota
	groupTool
	groupAmount
	groupCommand
	groupPath
	groupHost
	groupText
	groupInjection
	groupLimits
	numGroups
)

// maxReasonsPerGroup bounds the reasons listed per group; the rest are
// counted in one summary line.
const maxReasonsPerGroup = 5

// Weights of the signals that are not command rules.
const (
	weightMerge          = 20
	weightForcePush      = 20
	weightAmountOver     = 20
	weightAmountWithin   = -10
	weightCodeLater      = 25
	weightGitPath        = 20
	weightSecretPath     = 45
	weightPrivatePath    = 20
	weightDeleteRoot     = 40
	weightRecursiveDel   = 10
	weightHostMetadata   = 40
	weightHostInternal   = 20
	weightHostNotAllowed = 20
	weightHostNoList     = 5
	// A look-alike host and a URL parsers read differently make a call at
	// least high; their host is scored by the allowlist's signal.
	weightHostLookalike = 0
	weightHostAmbiguous = 0
	weightInjection     = 40
	weightNotScanned    = 15
	weightReadOnlyCmd   = -15
)

// Classify assesses one tool call: the tool's category gives a base score,
// signals in the arguments add to it (or, for a read-only command or a
// payment within the cap, take a little off), some signals impose a minimum
// level, and the score is clamped to 0–100. It is pure and deterministic,
// never panics, and stays bounded on hostile input (see the package
// documentation); args may hold anything encoding/json produces.
func Classify(tool string, args map[string]any, cfg Config) (res Assessment) {
	defer func() {
		if recover() != nil {
			// A classifier bug must fail closed, never open.
			res = Assessment{Level: Critical, Score: maxScore, Reasons: []string{internalErrorReason}}
		}
	}()
	a := assessor{cfg: cfg, amountCap: cfg.amountCap(), tool: analyzeTool(tool), w: newWalker(), joinedAt: -1, inj: newInjScanner()}
	a.score = a.tool.cat.BaseScore()
	if a.tool.cat == CategoryUnknown {
		a.reason(groupCategory, "unknown tool category")
	} else {
		a.reason(groupCategory, string(a.tool.cat)+" tool")
	}
	if a.tool.merge {
		a.signal(kindMerge, groupTool, weightMerge, "", "merges into a base branch")
	}
	a.w.walkArgs(&a, args)
	a.finish(args)
	return a.result()
}

// internalErrorReason is the only reason when the classifier itself failed.
const internalErrorReason = "internal classifier error: treated as critical"

// assessor accumulates signals while walking the arguments.
type assessor struct {
	cfg       Config
	amountCap float64
	tool      toolInfo
	w         walker
	inj       injScanner
	sh        shellParser

	score     int
	floorRank int
	scored    [numKinds]bool
	reasons   [numGroups][]string
	omitted   [numGroups]int
	injection bool

	amountFound bool
	amountMax   float64
	amountText  string // amountMax as the agent wrote it, when known
	joinBudget  int
	// allowed are cfg.AllowedHosts read for comparison, once a host is
	// met (nil until then).
	allowed []string
	// joinedAt is the path length of the argv list just joined and scanned
	// whole (-1 when none): its elements need no command scan of their own.
	joinedAt int
}

// signal records a signal: its weight counts once per kind, its floor raises
// the minimum level, its reason is listed once.
func (a *assessor) signal(k signalKind, g group, weight int, floor Level, reason string) {
	if !a.scored[k] {
		a.scored[k] = true
		a.score += weight
	}
	if r := floor.Rank(); r > a.floorRank {
		a.floorRank = r
	}
	a.reason(g, reason)
}

// reason lists r in group g once, up to maxReasonsPerGroup.
func (a *assessor) reason(g group, r string) {
	for _, x := range a.reasons[g] {
		if x == r {
			return
		}
	}
	if len(a.reasons[g]) >= maxReasonsPerGroup {
		a.omitted[g]++
		return
	}
	a.reasons[g] = append(a.reasons[g], r)
}

// has reports whether any signal of group g fired.
func (a *assessor) has(g group) bool { return len(a.reasons[g]) > 0 }

// result turns the accumulated signals into the Assessment.
func (a *assessor) result() Assessment {
	score := min(max(a.score, 0), maxScore)
	if a.floorRank > 0 {
		floor := [...]Level{Low, Medium, High, Critical}[a.floorRank]
		score = max(score, minScore(floor))
	}
	n := 0
	for g := range a.reasons {
		n += len(a.reasons[g]) + 1
	}
	reasons := make([]string, 0, n)
	for g := range a.reasons {
		reasons = append(reasons, a.reasons[g]...)
		if a.omitted[g] > 0 {
			reasons = append(reasons, fmt.Sprintf("%d more similar signals not listed", a.omitted[g]))
		}
	}
	return Assessment{Level: LevelForScore(score), Score: score, Reasons: reasons, Injection: a.injection}
}

// Keys whose values are commands, SQL, paths, network destinations or
// e-mail recipients.
var (
	commandKeys = keySet("command", "commands", "cmd", "argv", "args", "arguments", "script", "shell",
		"code", "cmdline", "commandline", "command_line", "exec", "run", "entrypoint", "program",
		"bash", "sh", "powershell", "sql", "statement", "statements", "stmt")
	sqlKeys   = keySet("sql", "statement", "statements", "stmt")
	dbSQLKeys = keySet("query", "queries", "q", "command", "cmd", "script")
	pathKeys  = keySet("path", "paths", "file", "files", "filename", "file_name", "filepath", "file_path",
		"src", "source", "dest", "destination", "target", "dir", "directory", "cwd", "workdir",
		"location", "output", "folder")
	urlKeys = keySet("url", "urls", "uri", "endpoint", "host", "hostname", "domain", "server",
		"base_url", "baseurl", "webhook", "webhook_url", "href", "link", "callback", "callback_url",
		"redirect", "redirect_uri", "redirect_url", "proxy", "origin", "remote", "api_url",
		"target_url", "destination_url")
	recipientKeys = keySet("to", "cc", "bcc", "recipient", "recipients", "email", "emails", "reply_to")
	// dataKeys hold data, not commands, even in an exec call's args.
	dataKeys = keySet("stdin", "input", "content", "contents", "body", "text", "data", "message",
		"description", "comment", "reason", "title", "note", "notes", "summary")
)

func keySet(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// commandContext reports whether strings under key are commands.
func (a *assessor) commandContext(key string) bool {
	return a.tool.cat == CategoryExec && !dataKeys[key] || commandKeys[key] || a.tool.db && dbSQLKeys[key]
}

// sqlContext reports whether SQL rules apply to strings under key: SQL
// fields anywhere, query fields of database tools, and shell commands.
func (a *assessor) sqlContext(key string) bool {
	return a.tool.cat == CategoryExec || sqlKeys[key] || a.tool.db && (dbSQLKeys[key] || commandKeys[key])
}

// visitString scans one string: injection everywhere; commands, paths and
// network destinations where the key and the tool say they are meaningful.
func (a *assessor) visitString(w *walker, s, key string, mapKey bool) {
	a.hiddenSignals(s, w, mapKey)
	norm, zw := normalizeText(s, false)
	if hits := a.inj.scan(s, norm, zw); len(hits) > 0 {
		a.injection = true
		where := w.pathString()
		if mapKey {
			where = "a key at " + where
		}
		r := "possible prompt injection in " + where + ": " + hits[0]
		if len(hits) > 1 {
			r += fmt.Sprintf(" (+%d more)", len(hits)-1)
		}
		a.signal(kindInjection, groupInjection, weightInjection, High, r)
	}
	if mapKey {
		return
	}
	cmd := a.commandContext(key)
	inJoined := a.joinedAt >= 0 && len(w.path) == a.joinedAt+1 && w.path[len(w.path)-1].idx >= 0
	if cmd && !inJoined {
		a.commandSignals(norm, a.sqlContext(key), w)
		if len(norm) > maxCommandText {
			a.signal(kindNotScanned, groupLimits, weightNotScanned, Medium,
				"args not fully scanned: command text over 64 KiB ("+w.pathString()+")")
		}
	} else if !cmd {
		a.commandLines(norm, w)
	}
	spaced := strings.ContainsAny(norm, " \n")
	if cmd || a.pathLike(norm, key, spaced) {
		a.pathSignals(pathTextOf(norm), w)
	}
	fileURLPaths(norm, key, cmd, spaced, func(p string) { a.pathSignals(pathTextOf(p), w) })
	a.hostSignals(s, key, cmd, spaced, w)
}

// commandSignals runs the command rules over one command text, as written
// and as the shell would read it.
func (a *assessor) commandSignals(norm string, sqlOK bool, w *walker) {
	emit := func(h cmdHit) {
		a.signal(h.kind, groupCommand, h.weight, h.floor, h.reason+" ("+w.pathString()+")")
	}
	scanCommand(norm, sqlOK, emit)
	if sh, ok := a.sh.shellForm(norm); ok {
		scanCommand(sh, sqlOK, emit)
	}
}

// pathLike reports whether a (non-command) value names a file: a one-line
// value of a path field, or a value without spaces that looks like a path.
// URLs are not local paths.
func (a *assessor) pathLike(norm, key string, spaced bool) bool {
	if strings.Contains(norm, "://") {
		return false
	}
	if pathKeys[key] {
		return !strings.Contains(norm, "\n")
	}
	return !spaced && (strings.ContainsAny(norm, "/\\") || strings.HasPrefix(norm, ".") || strings.HasPrefix(norm, "~"))
}

// pathSignals checks a path or command for targets that run code later,
// .git internals, secrets and, for delete tools, root-level targets.
func (a *assessor) pathSignals(p pathText, w *walker) {
	if a.tool.cat != CategoryRead {
		if pat, ok := matchPaths(p, codeLaterPatterns); ok {
			a.signal(kindCodeLater, groupPath, weightCodeLater, High,
				"targets code that runs later: "+pat.name()+" ("+w.pathString()+")")
		} else if pat, ok := matchPaths(p, buildFilePatterns); ok && a.tool.cat != CategoryExec {
			a.signal(kindCodeLater, groupPath, weightCodeLater, High,
				"targets code that runs later: "+pat.name()+" ("+w.pathString()+")")
		} else if hasGitDir(p.written) {
			a.signal(kindGitPath, groupPath, weightGitPath, "", "path under .git/ ("+w.pathString()+")")
		}
	}
	if pat, ok := matchPaths(p, secretPatterns); ok {
		a.signal(kindSecretPath, groupPath, weightSecretPath, "", "sensitive path "+pat.name()+" ("+w.pathString()+")")
	} else if pat, ok := matchPaths(p, privatePatterns); ok {
		a.signal(kindPrivatePath, groupPath, weightPrivatePath, "", "sensitive path "+pat.name()+" ("+w.pathString()+")")
	}
	if a.tool.cat == CategoryDelete && isRootLevel(strings.TrimSpace(p.written)) {
		a.signal(kindDeleteRoot, groupPath, weightDeleteRoot, Critical,
			fmt.Sprintf("deletes root-level path %q (%s)", strings.TrimSpace(p.written), w.pathString()))
	}
}

// hostSignals checks network destinations. Read and credential tools are
// not network calls; elsewhere URLs are taken from URL fields, commands and,
// for network, exec and unknown tools, any value that is a URL on its own.
// Hosts are read from s as written, never from its folded form: a
// look-alike letter changes where a request goes.
func (a *assessor) hostSignals(s, key string, cmd, spaced bool, w *walker) {
	switch a.tool.cat {
	case CategoryRead, CategoryCredential:
		return
	}
	broad := a.tool.cat == CategoryNetwork || a.tool.cat == CategoryExec || a.tool.cat == CategoryUnknown
	urlField := urlKeys[key]
	found := false
	if urlField || cmd || broad && !spaced {
		if whole := wholeURL(s); whole != "" && (urlField || !spaced) {
			// A tool passes a URL field on whole: read it as one URL.
			a.urlHosts(whole, whole, w)
			found = true
		} else {
			forEachURL(s, func(tok, ext string) {
				a.urlHosts(tok, ext, w)
				found = true
			})
		}
	}
	if !found && urlField && !spaced {
		written := bareHost(s)
		if h, ok := canonHost(written); ok && looksLikeHost(h) {
			a.host(hostName{written: written, ascii: h}, "host", w)
		} else if !ok && !isASCII(written) {
			a.unreadable("host "+Marked(snippet(written))+" cannot be read", w)
		}
	}
	if a.tool.cat == CategoryNetwork && recipientKeys[key] {
		forEachEmailDomain(s, func(d string) {
			if h, ok := canonHost(d); ok && strings.Contains(h, ".") {
				a.host(hostName{written: d, ascii: h}, "recipient domain", w)
			} else if !ok && !isASCII(d) {
				a.unreadable("recipient domain "+Marked(snippet(d))+" cannot be read", w)
			}
		})
	}
}

// urlHosts judges every host the parsers read in one URL: tok as text cuts
// it, ext as a client given the whole word reads it.
func (a *assessor) urlHosts(tok, ext string, w *walker) {
	var r hostRead
	r.read(tok, true)
	if ext != tok {
		r.read(ext, false)
	}
	if len(r.hosts) == 0 {
		if r.failed {
			a.unreadable("the host of URL "+Marked(snippet(tok))+" cannot be read", w)
		}
		return
	}
	if len(r.hosts) > 1 {
		names := make([]string, 0, 3)
		for _, h := range r.hosts[:min(len(r.hosts), 3)] {
			names = append(names, h.ascii)
		}
		a.signal(kindHostAmbiguous, groupHost, weightHostAmbiguous, High, "URL "+Marked(snippet(ext))+
			" reads as different hosts to different parsers: "+strings.Join(names, ", ")+" ("+w.pathString()+")")
	}
	for _, h := range r.hosts {
		a.host(h, "host", w)
	}
}

// unreadable records a network destination whose host cannot be read: it
// is never one the allowlist allows.
func (a *assessor) unreadable(reason string, w *walker) {
	weight, floor := weightHostNoList, Medium
	if len(a.cfg.AllowedHosts) > 0 {
		weight, floor = weightHostNotAllowed, High
	}
	a.signal(kindHostUnreadable, groupHost, weight, floor, reason+" ("+w.pathString()+")")
}

// host records a network destination that is not allowlisted, and says
// how a host written in Unicode or in punycode reads.
func (a *assessor) host(h hostName, what string, w *walker) {
	if a.allowed == nil {
		a.allowed = allowedHosts(a.cfg.AllowedHosts)
	}
	allowed := hostAllowed(h.ascii, a.allowed)
	where := " (" + w.pathString() + ")"
	switch look := lookalike(h.ascii); {
	case !isASCII(h.written):
		r := what + " " + Marked(snippet(h.written))
		switch {
		case look:
			r += " is written with look-alike letters (" + h.ascii + ")"
		case hasPunycode(h.ascii):
			r += " is written in Unicode (" + h.ascii + ")"
		default:
			r += " is written with non-ASCII characters (" + h.ascii + ")"
		}
		a.lookalikeReason(look && !allowed, r+where)
	case look:
		u, _ := hostProfile.ToUnicode(h.ascii)
		a.lookalikeReason(!allowed, what+" "+h.ascii+" spells "+Marked(snippet(u))+" in look-alike letters"+where)
	}
	if allowed {
		return
	}
	switch classifyHost(h.ascii) {
	case hostMetadata:
		a.signal(kindHostMetadata, groupHost, weightHostMetadata, High, "cloud metadata endpoint "+h.ascii+where)
	case hostInternal:
		a.signal(kindHostInternal, groupHost, weightHostInternal, Medium, "internal network address "+h.ascii+where)
	case hostNumeric:
		a.signal(kindHostNumeric, groupHost, weightHostInternal, Medium, "obfuscated numeric host "+h.ascii+where)
	default:
		if len(a.cfg.AllowedHosts) > 0 {
			a.signal(kindHostNotAllowed, groupHost, weightHostNotAllowed, Medium, what+" "+h.ascii+" not in allowed hosts"+where)
		} else {
			a.signal(kindHostNoAllowlist, groupHost, weightHostNoList, Medium, "network destination "+h.ascii+" (no host allowlist configured)")
		}
	}
}

// lookalikeReason lists how a host reads: as a signal that makes the call
// at least high when signal is set, else as a plain reason.
func (a *assessor) lookalikeReason(signal bool, r string) {
	if signal {
		a.signal(kindHostLookalike, groupHost, weightHostLookalike, High, r)
		return
	}
	a.reason(groupHost, r)
}

// visitEntry looks at map entries for amounts and for boolean flags that
// matter to the tool (force pushes, recursive deletes).
func (a *assessor) visitEntry(w *walker, key string, v any, hasCurrency bool) {
	if ok, cents := amountKey(key, a.tool.cat == CategoryPayment, hasCurrency); ok {
		if f, ok := parseAmount(v); ok {
			if cents {
				f /= 100
			}
			if !a.amountFound || f > a.amountMax {
				a.amountFound, a.amountMax, a.amountText = true, f, ""
				if n, exact := v.(json.Number); exact && !cents && len(n) <= 40 {
					a.amountText = strings.TrimPrefix(string(n), "-") // as sent, not rounded
				}
			}
		}
	}
	if b, _ := v.(bool); b {
		switch {
		case a.tool.push && (key == "force" || key == "force_push"):
			a.signal(kindForcePush, groupTool, weightForcePush, "", "force push ("+w.pathString()+")")
		case a.tool.cat == CategoryDelete && key == "recursive":
			a.signal(kindRecursiveDelete, groupTool, weightRecursiveDel, "", "recursive delete ("+w.pathString()+")")
		}
	}
}

// maxJoin bounds the text built from joining argv lists in one call.
const maxJoin = 1 << 20

// visitList joins a list of strings in command position (argv) so that
// commands split across elements ("rm", "-rf", "/") are seen whole.
func (a *assessor) visitList(w *walker, l list, key string) {
	a.joinedAt = -1
	a.listInjection(w, l)
	n := l.len()
	if n < 2 || !a.commandContext(key) {
		return
	}
	size := n - 1
	for i := 0; i < n; i++ {
		s, ok := l.str(i)
		if !ok {
			return
		}
		size += len(s)
	}
	if a.joinBudget+size > maxJoin {
		return
	}
	a.joinBudget += size
	var b strings.Builder
	b.Grow(size)
	for i := 0; i < n; i++ {
		s, _ := l.str(i)
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s)
	}
	norm := normalize(b.String(), false)
	a.commandSignals(norm, a.sqlContext(key), w)
	if len(norm) > maxCommandText {
		a.signal(kindNotScanned, groupLimits, weightNotScanned, Medium,
			"args not fully scanned: command text over 64 KiB ("+w.pathString()+")")
	}
	a.joinedAt = len(w.path)
}

// finish adds the signals that need the whole walk: amounts, read-only
// commands and scan limits.
func (a *assessor) finish(args map[string]any) {
	if a.amountFound {
		amt, capStr := formatAmount(a.amountMax), formatAmount(a.amountCap)
		if a.amountText != "" {
			amt = a.amountText
		}
		switch {
		case a.amountMax > 10*a.amountCap:
			a.signal(kindAmountFar, groupAmount, weightAmountOver, Critical,
				"amount "+amt+" exceeds cap "+capStr+" by more than 10x")
		case a.amountMax > a.amountCap:
			a.signal(kindAmountOver, groupAmount, weightAmountOver, "", "amount "+amt+" exceeds cap "+capStr)
		case a.tool.cat == CategoryPayment:
			a.signal(kindAmountWithin, groupAmount, weightAmountWithin, "", "amount "+amt+" within cap "+capStr)
		}
	}
	if a.tool.cat == CategoryExec && !a.has(groupCommand) && !a.has(groupPath) && !a.has(groupHost) && !a.has(groupInjection) && !a.w.limited() {
		if name, ok := readOnlyCommand(args); ok {
			a.signal(kindReadOnlyCmd, groupCommand, weightReadOnlyCmd, "", "read-only command: "+name)
		}
	}
	if a.w.depthHit {
		a.signal(kindNotScanned, groupLimits, weightNotScanned, Medium,
			fmt.Sprintf("args not fully scanned: nested deeper than %d levels", maxDepth))
	}
	if a.w.bytesHit {
		a.signal(kindNotScanned, groupLimits, weightNotScanned, Medium, "args not fully scanned: more than 1 MiB of text")
	}
	if a.inj.limited {
		a.signal(kindNotScanned, groupLimits, weightNotScanned, Medium, "args not fully scanned: decoding budget exhausted")
	}
	if a.w.nodesHit {
		a.signal(kindNotScanned, groupLimits, weightNotScanned, Medium,
			fmt.Sprintf("args not fully scanned: more than %d values", maxNodes))
	}
}
