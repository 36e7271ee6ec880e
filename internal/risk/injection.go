package risk

import (
	"html"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// An injRule is one prompt-injection family: a pattern over normalised text
// and the words (or symbols) a match can start with. Matching is driven by
// one pass over the words of the text; the pattern only runs, anchored, where
// one of its anchors starts a word, so scanning stays linear and cheap.
type injRule struct {
	anchors []string
	need    []string
	re      *regexp.Regexp
}

// sep is a word separator inside patterns: characters that are neither
// letters nor digits, so "ignore  all", "ignore-all" and "**ignore** all"
// all match.
const sep = `[^a-z0-9]+`

// expandSep replaces {S} in a pattern with sep, and {S}? with an optional
// separator.
func expandSep(pattern string) string {
	pattern = strings.ReplaceAll(pattern, "{S}?", `[^a-z0-9]*`)
	return strings.ReplaceAll(pattern, "{S}", sep)
}

func injection(anchors []string, pattern string) injRule {
	return injRule{anchors: anchors, re: regexp.MustCompile(`\A(?:` + expandSep(pattern) + `)`)}
}

// needs adds the words of which at least one must occur somewhere in the
// text for the rule to be worth running: the object of the phrase, whose
// absence rules out a match cheaply.
func (r injRule) needs(words ...string) injRule {
	r.need = words
	return r
}

// injectionRules are the prompt-injection families. They aim at phrases that
// address a model, not at words: "please ignore the previous email" is not a
// hit, "ignore all previous instructions" is.
var injectionRules = []injRule{
	// "ignore all previous instructions", "disregard your system prompt",
	// "ignore what you were told", "ignore the above and instead ...".
	injection([]string{"ignore", "ignoring", "disregard", "disregarding", "forget", "forgetting", "override",
		"overriding", "bypass", "bypassing", "dismiss", "dismissing", "discard", "discarding", "abandon",
		"abandoning", "neglect", "neglecting"},
		`\b(?:ignor(?:e|ing)|disregard(?:ing)?|forget(?:ting)?|overrid(?:e|ing)|bypass(?:ing)?|dismiss(?:ing)?|discard(?:ing)?|abandon(?:ing)?|neglect(?:ing)?)`+
			`(?:{S}(?:all|any|every|each|of|the|your|my|our|these|those|its|their|and|or|previous|previously|prior|above|preceding|earlier|foregoing|former|original|initial|system|developer|safety|existing|old|current|given|other|preset|default|mentioned|stated|provided|received)){1,6}`+
			`{S}(?:instructions?|prompts?|rules|directives?|guidelines|guardrails|constraints|restrictions|programming)\b`+
			`|\bignor(?:e|ing){S}(?:what|everything|anything){S}you(?:{S}?(?:were|have|'ve|had|been))+{S}(?:told|given|instructed|taught|asked)\b`+
			`|\b(?:ignor(?:e|ing)|disregard(?:ing)?)(?:{S}(?:all|everything|of|the))*{S}(?:above|previous|preceding|prior|earlier)(?:{S}(?:text|content|message|messages|context|conversation))?{S}(?:and{S})?(?:instead|now{S}(?:you|do|say|respond|reply|write|output|print))\b`).needs("instruction", "instructions", "prompt", "prompts", "rules", "directive", "directives", "guidelines", "guardrails", "constraints", "restrictions", "programming", "told", "given", "instructed", "taught", "asked", "above", "previous", "preceding", "prior", "earlier"),
	// "forget everything".
	injection([]string{"forget"},
		`\bforget(?:{S}about)?{S}(?:everything|all{S}(?:of{S})?(?:the{S})?(?:previous|prior|above|preceding|earlier))\b`).needs("everything", "all"),
	// "you are now DAN", "you are now an AI without restrictions".
	injection([]string{"you", "youre"},
		`\byou{S}?(?:are|'re|re){S}now(?:{S}(?:a|an|the|acting|going|operating|officially|fully))?{S}`+
			`(?:dan\b|unrestricted|unfiltered|uncensored|unbound|unlocked|unchained|jailbroken|evil|rogue|free{S}(?:from|of)`+
			`|no{S}longer{S}(?:bound|restricted|limited|an?{S}(?:ai|assistant|language))`+
			`|in{S}(?:developer|dev|god|dan|jailbreak|unrestricted|admin|sudo|debug){S}mode`+
			`|(?:ai|assistant|chatbot|model|language{S}model|llm){S}(?:that|which|without|with{S}no|who|called|named)`+
			`|called\b|named\b|to{S}(?:act|pretend|ignore|roleplay)|as{S}(?:an?{S})?\w|my{S}(?:assistant|slave|servant|puppet)`+
			`|(?:different|new){S}(?:ai|assistant|model|persona|character))`).needs("now"),
	// "act as DAN", "pretend to be an unrestricted AI".
	injection([]string{"act", "acting", "behave", "pretend", "pretending", "roleplay", "role"},
		`\b(?:act|acting|behave|pretend|pretending|roleplay|role{S}?play)(?:{S}(?:to{S}be|like|as|as{S}if{S}you{S}(?:are|were)|you{S}are|that{S}you{S}are|being))*(?:{S}(?:a|an|the))?{S}`+
			`(?:dan\b|unrestricted|unfiltered|uncensored|jailbroken|unbound|unchained|evil|rogue`+
			`|(?:ai|assistant|model|chatbot|llm){S}(?:without|with{S}no){S}(?:restrictions|limits|limitations|filters|rules|guidelines|ethics|morals))`).needs("dan", "unrestricted", "unfiltered", "uncensored", "jailbroken", "unbound", "unchained", "evil", "rogue", "without", "no"),
	// "do anything now" (DAN).
	injection([]string{"do", "dan"}, `\bdo{S}anything{S}now\b|\bdan{S}(?:mode|prompt|jailbreak)\b`).needs("anything", "mode", "prompt", "jailbreak"),
	// "jailbreak".
	injection([]string{"jailbreak", "jailbreaks", "jailbreaking", "jailbroken", "jail"}, `\bjail(?:{S})?(?:break(?:s|ing|ed|er)?|broken)\b`),
	// "you are in developer mode", "developer mode enabled".
	injection([]string{"you", "enter", "entering", "activate", "activating", "switch", "switching", "unlock", "unlocking",
		"developer", "dan", "jailbreak", "jailbroken", "unrestricted", "god"},
		`(?:\byou{S}?(?:are|'re){S}(?:now{S})?in|\benter(?:ing)?|\bactivat(?:e|ing)|\bswitch(?:ing)?{S}(?:in)?to|\bunlock(?:ing)?)(?:{S}(?:the|a))?{S}(?:developer|dev|god|dan|jailbreak|jailbroken|unrestricted|sudo|admin|debug){S}mode\b`+
			`|\b(?:developer|dan|jailbreak|jailbroken|unrestricted|god){S}mode{S}(?:enabled|activated|unlocked|output)\b`+
			`|\b(?:dan|jailbreak|jailbroken|unrestricted){S}mode\b`).needs("mode"),
	// Chat-template tokens anywhere.
	injection([]string{"<", "["},
		`<\|(?:im_start|im_end|system|user|assistant|endoftext|begin_of_text|start_header_id|end_header_id|eot_id)\|>`+
			`|\[/?inst\]|<</?sys>>|<(?:start|end)_of_turn>|</?system(?:_prompt|_message)?>`),
	// "new instructions:".
	injection([]string{"new", "real", "actual", "true", "secret", "hidden", "override", "overriding", "updated", "revised"},
		`\b(?:new|real|actual|true|secret|hidden|override|overriding|updated{S}system|revised{S}system)(?:{S}(?:system|admin|developer|priority|important))?{S}instructions?[ \t]*:`).needs("instruction", "instructions"),
	// Text addressed to a model: "if you are an AI", "Note to the AI:".
	injection([]string{"if", "note", "message", "instruction", "instructions", "attention", "important", "notice", "memo", "dear", "hey", "hello", "hi"},
		`\bif{S}you{S}?(?:are|'re|re){S}(?:an?{S})?(?:ai|llm|large{S}language{S}model|language{S}model|chatbot|gpt|chatgpt|claude|copilot|gemini|bard|ai{S}(?:agent|assistant|model))\b`+
			`|\b(?:note|message|instructions?|attention|important|notice|memo)(?:{S}(?:to|for))?{S}(?:the{S}|any{S}|all{S})?(?:ai|llm|language{S}models?|chatbots?|gpt|chatgpt|claude|copilot|gemini|ai{S}(?:agents?|assistants?|models?))`+
			`(?:[ \t]*[:,!]|{S}(?:reading|processing|summari[sz]ing|parsing|agents?|assistants?|models?)\b)`+
			`|\b(?:dear|hey|hello|hi){S}(?:ai|llm|chatbot|gpt|chatgpt|claude|copilot|gemini|ai{S}(?:agent|assistant))\b(?:{S}(?:agent|assistant|model))?[ \t]*[:,!]`).needs("ai", "llm", "language", "chatbot", "chatbots", "gpt", "chatgpt", "claude", "copilot", "gemini", "bard"),
	// "from now on you will only ...".
	injection([]string{"from"},
		`\bfrom{S}now{S}on(?:{S})?you{S}(?:will|must|are|shall|should|have{S}to|can)(?:{S}(?:only|always|never|not|no{S}longer|ignore|act|respond|reply|answer|obey))`).needs("now"),
	// Hiding the action from the human.
	injection([]string{"do", "don", "dont", "never", "hide", "conceal", "without"},
		`\b(?:do{S}not|don't|dont|never)(?:{S})?(?:tell|inform|notify|alert|warn){S}(?:the{S})?(?:user|human|operator)s?{S}(?:about|of){S}(?:this|these|it|that)\b`+
			`|\b(?:do{S}not|don't|dont|never)(?:{S})?(?:mention|reveal|disclose){S}(?:this|these|it|that)(?:{S}\w+)?{S}to{S}(?:the{S})?(?:user|human|operator)s?\b`+
			`|\b(?:hide|conceal){S}(?:this|it|that){S}from{S}(?:the{S})?(?:user|human|operator)\b`+
			`|\bwithout{S}(?:the{S})?(?:user|human|operator)(?:'s)?{S}(?:knowing|noticing)\b`+
			`|\bwithout{S}(?:telling|informing|alerting){S}(?:the{S})?(?:user|human|operator)\b`).needs("user", "users", "human", "operator", "operators"),
	// Exfiltration.
	injection([]string{"exfiltrate", "exfiltrates", "exfiltrated", "exfiltrating", "exfiltration"}, `\bexfiltrat\w*`),
	// "send your API keys to ...".
	injection([]string{"send", "sending", "email", "mail", "forward", "upload", "transmit", "leak", "dump", "exfiltrate"},
		`\b(?:send|sending|email|mail|forward|upload|transmit|leak|dump|exfiltrate)`+
			`(?:{S}(?:me|us|over|out|all|the|your|my|our|their|any|every|of|these|those|its|user's|users|admin's|system's|stored|saved|current|full|complete|private|secret|aws|openai|anthropic|stripe|github|ssh|gcp|azure|cloud|production|prod|environment|api|access|login))*`+
			`{S}(?:api(?:{S})?keys?|apikeys?|access(?:{S})?keys?|secret(?:{S})?keys?|private(?:{S})?keys?|ssh(?:{S})?keys?|keys|credentials|creds|passwords?|passwd|secrets|tokens?|auth(?:{S})?tokens?|session(?:{S})?(?:cookies?|tokens?)|cookies|env(?:ironment)?{S}(?:variables|vars|file)|\.env)\b`+
			`[^\n]{0,100}?(?:\b(?:to|at|via|into|using)\b|@|https?://)`).needs("key", "keys", "apikey", "apikeys", "credentials", "creds", "password", "passwords", "passwd", "secrets", "token", "tokens", "cookie", "cookies", "env", "variables", "vars"),
	// "upload ~/.ssh/id_rsa ...".
	injection([]string{"upload", "send", "post", "email", "mail", "forward", "exfiltrate", "transmit", "leak"},
		`\b(?:upload|send|post|email|mail|forward|exfiltrate|transmit|leak)\b[^\n]{0,80}?(?:~/\.ssh|\.ssh/|\bid_rsa\b|\bid_ed25519\b|\.aws/credentials|/etc/shadow|/etc/passwd|\.git-credentials|\.netrc|\.env\b)`).needs("ssh", "rsa", "ed25519", "aws", "shadow", "passwd", "credentials", "netrc", "env"),
	// "print your system prompt", "reveal your instructions".
	injection([]string{"print", "reveal", "show", "display", "output", "repeat", "tell", "leak", "dump", "disclose", "share", "give", "write", "recite", "what"},
		`\b(?:print|reveal|show|display|output|repeat|tell{S}me|leak|dump|disclose|share|give{S}me|write{S}out|recite|what{S}(?:is|are|was|were))(?:{S}(?:me|us))?{S}(?:your|the)(?:{S}(?:full|entire|complete|original|initial|hidden|secret|exact|verbatim|first|internal))*{S}`+
			`(?:system{S}(?:prompt|message|instructions?)|(?:developer|hidden|initial|original|secret|internal){S}(?:prompt|instructions?|message))\b`+
			`|\b(?:print|reveal|show|display|output|repeat|tell{S}me|leak|dump|disclose|recite|what{S}(?:is|are))(?:{S}(?:me|us))?{S}your(?:{S}(?:full|entire|complete|original|initial|hidden|secret|exact))*{S}(?:prompt|instructions)\b`+
			`|\brepeat(?:{S}(?:all|of|the))*{S}(?:words|text|everything|lines){S}(?:above|before)\b`).needs("prompt", "instructions", "instruction", "message", "words", "text", "everything", "lines"),
	// "disable your safety filters", "ignore your programming".
	injection([]string{"override", "overriding", "bypass", "bypassing", "disable", "disabling", "circumvent", "circumventing",
		"ignore", "ignoring", "turn", "remove", "removing", "evade", "get", "break"},
		`\b(?:override|overriding|bypass|bypassing|disable|disabling|circumvent|circumventing|ignore|ignoring|turn{S}off|remove|removing|evade|get{S}around|break{S}free{S}(?:of|from))(?:{S}(?:all|any|of))*{S}(?:your|its)(?:{S}(?:own|built-in|builtin|internal|current|existing))*{S}`+
			`(?:(?:safety|content|ethical|moral|security){S}(?:filters?|guidelines|policies|policy|rules|restrictions|protocols|measures|training)|guardrails|safeguards|alignment|programming|ethics|morals|restrictions|limitations|safety{S}(?:training|features))\b`).needs("safety", "content", "ethical", "moral", "security", "guardrails", "safeguards", "alignment", "programming", "ethics", "morals", "restrictions", "limitations"),
}

// roleLine matches fake role markers at the start of a line: "### System"
// headings, and "System: you must ..." followed by instruction-like text.
// "system: linux" in a config value is not a hit.
var roleLine = regexp.MustCompile(expandSep(
	`\A[ \t>*]*(?:#{1,6}[ \t]*(?:system(?:{S}(?:prompt|message|override|instructions?))?|(?:new|updated|override|admin|developer){S}instructions?)[ \t:*]*(?:\n|\z)` +
		`|(?:system|developer|admin|administrator|assistant)(?:{S}(?:prompt|message|override|note))?[ \t*]*:[ \t*\n]*` +
		`(?:you\b|your{S}(?:new|real|true|actual|only)|ignore|disregard|forget|from{S}now{S}on|new{S}instructions?|override|do{S}not|don't|dont|always|never|the{S}user|act\b|respond|reply|pretend|stop|execute|run\b|send|reveal|print|output))`))

// roleWords are the first words of a line that roleLine can match.
var roleWords = keySet("system", "developer", "admin", "administrator", "assistant")

// injectionWords maps each anchor or need word to the rules (a bit per rule
// index) it anchors or satisfies; anchorBytes does the same for symbol
// anchors. ruleNeeds marks the rules that have need words. wordPrefix marks
// the two-letter prefixes of all those words, so most words of ordinary
// text are skipped without a map lookup.
var (
	injectionWords = map[string]wordRules{}
	anchorBytes    [256]uint32
	ruleNeeds      uint32
	wordPrefix     [26 * 26]bool
)

// wordRules says which rules a word anchors and which it satisfies.
type wordRules struct{ anchor, need uint32 }

func init() {
	if len(injectionRules) > 32 {
		panic("risk: too many injection rules for the rule bitmask")
	}
	addWord := func(w string, anchor, need uint32) {
		wr := injectionWords[w]
		wr.anchor |= anchor
		wr.need |= need
		injectionWords[w] = wr
		if len(w) >= 2 && isLower(w[0]) && isLower(w[1]) {
			wordPrefix[int(w[0]-'a')*26+int(w[1]-'a')] = true
		}
	}
	for i, r := range injectionRules {
		bit := uint32(1) << i
		for _, a := range r.anchors {
			if isLetter(a[0]) {
				addWord(a, bit, 0)
			} else {
				anchorBytes[a[0]] |= bit
			}
		}
		for _, w := range r.need {
			addWord(w, 0, bit)
		}
		if len(r.need) > 0 {
			ruleNeeds |= bit
		}
	}
}

// lookupWord returns the rules a word of normalised text anchors or
// satisfies.
func lookupWord(w string) wordRules {
	if len(w) < 2 || len(w) > 16 || !isLower(w[0]) || !isLower(w[1]) || !wordPrefix[int(w[0]-'a')*26+int(w[1]-'a')] {
		return wordRules{}
	}
	return injectionWords[w]
}

// injectionWindow bounds the text after an anchor that a pattern can span.
const injectionWindow = 240

// maxSnippet bounds the quoted text in a hit description.
const maxSnippet = 80

// ScanInjection scans one string for prompt-injection patterns and returns
// human-readable descriptions of the hits (nil if clean), each the matched
// text quoted, e.g. "\"ignore previous instructions\"", with a note when it
// was found only after decoding ("(base64-encoded)"). The string is
// normalised first (case, invisible characters, look-alike letters,
// whitespace); base64 blobs, percent-encoding and HTML entities are decoded
// once and rescanned. At most the first 1 MiB of s is scanned.
func ScanInjection(s string) []string {
	if len(s) > maxScanBytes {
		s = truncateUTF8(s, maxScanBytes)
	}
	norm, zw := normalizeText(s, false)
	return scanInjection(s, norm, zw)
}

// scanInjection scans raw, whose normal form is norm; zw tells whether raw
// holds zero-width characters.
func scanInjection(raw, norm string, zw bool) []string {
	var hits []string
	hits = matchInjection(norm, "", hits)
	if zw {
		hits = matchInjection(normalize(raw, true), "", hits)
	}
	if strings.IndexByte(raw, '%') >= 0 {
		if dec, ok := percentDecode(raw); ok {
			hits = matchInjection(normalize(dec, false), " (url-encoded)", hits)
		}
	}
	if strings.IndexByte(raw, '&') >= 0 && strings.IndexByte(raw, ';') >= 0 {
		if dec := html.UnescapeString(raw); dec != raw {
			hits = matchInjection(normalize(dec, false), " (html-escaped)", hits)
		}
	}
	return scanBase64(raw, hits)
}

// anchorAt is a position in the text where some rules may start.
type anchorAt struct {
	pos  int
	mask uint32
}

// matchInjection appends a description for every rule that matches text,
// in the order the matches start. Each rule reports at most once. One pass
// over the words of the text finds the anchors and which rules' need words
// occur; the patterns then run, anchored, only there.
func matchInjection(text, note string, hits []string) []string {
	var buf [32]anchorAt
	anchors := buf[:0]
	var seen uint32 // rules whose need words occur
	roleFound := false
	for i := 0; i < len(text); {
		if !roleFound && (i == 0 || text[i-1] == '\n') {
			if m := matchRoleLine(text, i); m != "" {
				hits = appendHit(hits, snippet(m), note)
				roleFound = true
			}
		}
		c := text[i]
		if !alnumBytes[c] {
			if mask := anchorBytes[c]; mask != 0 {
				anchors = append(anchors, anchorAt{i, mask})
			}
			i++
			continue
		}
		j := i + 1
		for j < len(text) && alnumBytes[text[j]] {
			j++
		}
		if wr := lookupWord(text[i:j]); wr != (wordRules{}) {
			seen |= wr.need
			if wr.anchor != 0 {
				anchors = append(anchors, anchorAt{i, wr.anchor})
			}
		}
		i = j
	}
	ready := ^ruleNeeds | seen
	var found uint32
	for _, a := range anchors {
		if mask := a.mask & ready &^ found; mask != 0 {
			found, hits = tryRules(text, a.pos, mask, found, note, hits)
		}
	}
	return hits
}

// tryRules runs the rules in mask anchored at text[i].
func tryRules(text string, i int, mask, found uint32, note string, hits []string) (uint32, []string) {
	end := min(len(text), i+injectionWindow)
	for end < len(text) && isWordByte(text[end]) && end-i < injectionWindow+64 {
		end++
	}
	for k := range injectionRules {
		if mask&(1<<k) == 0 {
			continue
		}
		if m := injectionRules[k].re.FindString(text[i:end]); m != "" {
			found |= 1 << k
			hits = appendHit(hits, snippet(m), note)
		}
	}
	return found, hits
}

// matchRoleLine tries roleLine on the line starting at text[i] (and the
// line after it, for "System:\nyou ...").
func matchRoleLine(text string, i int) string {
	k := i
	for k < len(text) && k-i < 16 && strings.IndexByte(" \t>*", text[k]) >= 0 {
		k++
	}
	if k >= len(text) {
		return ""
	}
	if text[k] != '#' {
		e := k
		for e < len(text) && isLetter(text[e]) {
			e++
		}
		if !roleWords[text[k:e]] {
			return ""
		}
	}
	end := len(text)
	if n := strings.IndexByte(text[k:], '\n'); n >= 0 {
		end = k + n + 1
		if n2 := strings.IndexByte(text[end:], '\n'); n2 >= 0 {
			end += n2 + 1
		} else {
			end = len(text)
		}
	}
	return roleLine.FindString(text[i:min(end, i+lineWindow)])
}

// appendHit adds `"snippet"note` unless that snippet is already reported.
func appendHit(hits []string, snip, note string) []string {
	q := strconv.Quote(snip)
	for _, h := range hits {
		if strings.HasPrefix(h, q) {
			return hits
		}
	}
	return append(hits, q+note)
}

// snippet trims a match for display: one line, at most maxSnippet bytes.
func snippet(m string) string {
	m = strings.TrimSpace(strings.ReplaceAll(m, "\n", " "))
	if len(m) > maxSnippet {
		m = truncateUTF8(m, maxSnippet) + "…"
	}
	return m
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// percentDecode decodes %XX escapes leniently (malformed ones stay as they
// are) and reports whether anything changed.
func percentDecode(s string) (string, bool) {
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			if b == nil {
				b = make([]byte, 0, len(s))
				b = append(b, s[:i]...)
			}
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		if b != nil {
			b = append(b, s[i])
		}
	}
	if b == nil {
		return s, false
	}
	return string(b), true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
