package risk

import (
	"regexp"
	"strings"
)

// An injRule is one prompt-injection family: a pattern over normalised
// text, the words (or symbols) a match can start with, and optionally need
// words of which one must follow the anchor closely. Matching is driven by
// one pass over the words of the text; the pattern only runs, anchored, at
// an anchor with a need word within reach, so scanning stays linear and
// cheap. Patterns must stay under 500 compiled instructions so that Go's
// regexp runs them with its fast backtracker (see the tests).
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

// injection builds an injRule; the pattern is anchored at the anchor word.
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
	// "ignore all previous instructions", "disregard your system prompt".
	injection([]string{"ignore", "ignoring", "disregard", "disregarding", "forget", "forgetting", "override",
		"overriding", "bypass", "bypassing", "dismiss", "dismissing", "discard", "discarding", "abandon",
		"abandoning", "neglect", "neglecting"},
		`\b(?:ignor(?:e|ing)|disregard(?:ing)?|forget(?:ting)?|overrid(?:e|ing)|bypass(?:ing)?|dismiss(?:ing)?|discard(?:ing)?|abandon(?:ing)?|neglect(?:ing)?)`+
			`(?:{S}(?:all|any|every|each|of|the|your|my|our|these|those|its|their|and|or|previous|previously|prior|above|preceding|earlier|foregoing|former|original|initial|system|developer|safety|existing|old|current|given|other|preset|default|mentioned|stated|provided|received))+`+
			`{S}(?:instructions?|prompts?|rules|directives?|guidelines|guardrails|constraints|restrictions|programming)\b`).
		needs("instruction", "instructions", "prompt", "prompts", "rules", "directive", "directives", "guidelines",
			"guardrails", "constraints", "restrictions", "programming"),
	// "ignore what you were told".
	injection([]string{"ignore", "ignoring"},
		`\bignor(?:e|ing){S}(?:what|everything|anything){S}you(?:{S}?(?:were|have|'ve|had|been))+{S}(?:told|given|instructed|taught|asked)\b`).
		needs("told", "given", "instructed", "taught", "asked"),
	// "ignore the above and instead ...".
	injection([]string{"ignore", "ignoring", "disregard", "disregarding"},
		`\b(?:ignor(?:e|ing)|disregard(?:ing)?)(?:{S}(?:all|everything|of|the))*{S}(?:above|previous|preceding|prior|earlier)(?:{S}(?:text|content|message|messages|context|conversation))?{S}(?:and{S})?(?:instead|now{S}(?:you|do|say|respond|reply|write|output|print))\b`).
		needs("above", "previous", "preceding", "prior", "earlier"),
	// "forget everything".
	injection([]string{"forget"},
		`\bforget(?:{S}about)?{S}(?:everything|all{S}(?:of{S})?(?:the{S})?(?:previous|prior|above|preceding|earlier))\b`).
		needs("everything", "all"),
	// "you are now DAN", "you are now in developer mode".
	injection([]string{"you", "youre"},
		`\byou{S}?(?:are|'re|re){S}now(?:{S}(?:a|an|the|acting|going|operating|officially|fully))?{S}`+
			`(?:dan\b|unrestricted|unfiltered|uncensored|unbound|unlocked|unchained|jailbroken|evil|rogue|free{S}(?:from|of)`+
			`|no{S}longer{S}(?:bound|restricted|limited|an?{S}(?:ai|assistant|language))`+
			`|in{S}(?:developer|dev|god|dan|jailbreak|unrestricted|admin|sudo|debug){S}mode)`).
		needs("now"),
	// "you are now an AI without restrictions", "you are now called ...".
	injection([]string{"you", "youre"},
		`\byou{S}?(?:are|'re|re){S}now(?:{S}(?:a|an|the|acting|going|operating|officially|fully))?{S}`+
			`(?:(?:ai|assistant|chatbot|model|language{S}model|llm){S}(?:that|which|without|with{S}no|who|called|named)`+
			`|called\b|named\b|to{S}(?:act|pretend|ignore|roleplay)|as{S}(?:an?{S})?\w|my{S}(?:assistant|slave|servant|puppet)`+
			`|(?:different|new){S}(?:ai|assistant|model|persona|character))`).
		needs("now"),
	// "act as DAN", "pretend to be an unrestricted AI".
	injection([]string{"act", "acting", "behave", "pretend", "pretending", "roleplay", "role"},
		`\b(?:act|acting|behave|pretend|pretending|roleplay|role{S}?play)(?:{S}(?:to{S}be|like|as|as{S}if{S}you{S}(?:are|were)|you{S}are|that{S}you{S}are|being))*(?:{S}(?:a|an|the))?{S}`+
			`(?:dan\b|unrestricted|unfiltered|uncensored|jailbroken|unbound|unchained|evil|rogue`+
			`|(?:ai|assistant|model|chatbot|llm){S}(?:without|with{S}no){S}(?:restrictions|limits|limitations|filters|rules|guidelines|ethics|morals))`).
		needs("dan", "unrestricted", "unfiltered", "uncensored", "jailbroken", "unbound", "unchained", "evil", "rogue", "without", "no"),
	// "do anything now" (DAN).
	injection([]string{"do", "dan"}, `\bdo{S}anything{S}now\b|\bdan{S}(?:mode|prompt|jailbreak)\b`).
		needs("anything", "mode", "prompt", "jailbreak"),
	// "jailbreak".
	injection([]string{"jailbreak", "jailbreaks", "jailbreaking", "jailbroken", "jail"}, `\bjail(?:{S})?(?:break(?:s|ing|ed|er)?|broken)\b`),
	// "you are in developer mode", "developer mode enabled".
	injection([]string{"you", "enter", "entering", "activate", "activating", "switch", "switching", "unlock", "unlocking",
		"developer", "dan", "jailbreak", "jailbroken", "unrestricted", "god"},
		`(?:\byou{S}?(?:are|'re){S}(?:now{S})?in|\benter(?:ing)?|\bactivat(?:e|ing)|\bswitch(?:ing)?{S}(?:in)?to|\bunlock(?:ing)?)(?:{S}(?:the|a))?{S}(?:developer|dev|god|dan|jailbreak|jailbroken|unrestricted|sudo|admin|debug){S}mode\b`+
			`|\b(?:developer|dan|jailbreak|jailbroken|unrestricted|god){S}mode{S}(?:enabled|activated|unlocked|output)\b`+
			`|\b(?:dan|jailbreak|jailbroken|unrestricted){S}mode\b`).
		needs("mode"),
	// Chat-template tokens anywhere.
	injection([]string{"<", "["},
		`<\|(?:im_start|im_end|system|user|assistant|endoftext|begin_of_text|start_header_id|end_header_id|eot_id)\|>`+
			`|\[/?inst\]|<</?sys>>|<(?:start|end)_of_turn>|</?system(?:_prompt|_message)?>`),
	// "new instructions:".
	injection([]string{"new", "real", "actual", "true", "secret", "hidden", "override", "overriding", "updated", "revised"},
		`\b(?:new|real|actual|true|secret|hidden|override|overriding|updated{S}system|revised{S}system)(?:{S}(?:system|admin|developer|priority|important))?{S}instructions?[ \t]*:`).
		needs("instruction", "instructions"),
	// "if you are an AI ...".
	injection([]string{"if"},
		`\bif{S}you{S}?(?:are|'re|re){S}(?:an?{S})?(?:ai|llm|large{S}language{S}model|language{S}model|chatbot|gpt|chatgpt|claude|copilot|gemini|bard|ai{S}(?:agent|assistant|model))\b`).
		needs(modelWords...),
	// "Note to the AI:", "Attention AI agents".
	injection([]string{"note", "message", "instruction", "instructions", "attention", "important", "notice", "memo"},
		`\b(?:note|message|instructions?|attention|important|notice|memo)(?:{S}(?:to|for))?{S}(?:the{S}|any{S}|all{S})?(?:ai|llm|language{S}models?|chatbots?|gpt|chatgpt|claude|copilot|gemini|ai{S}(?:agents?|assistants?|models?))`+
			`(?:[ \t]*[:,!]|{S}(?:reading|processing|summari[sz]ing|parsing|agents?|assistants?|models?)\b)`).
		needs(modelWords...),
	// "Dear AI,".
	injection([]string{"dear", "hey", "hello", "hi"},
		`\b(?:dear|hey|hello|hi){S}(?:ai|llm|chatbot|gpt|chatgpt|claude|copilot|gemini|ai{S}(?:agent|assistant))\b(?:{S}(?:agent|assistant|model))?[ \t]*[:,!]`).
		needs(modelWords...),
	// "from now on you will only ...".
	injection([]string{"from"},
		`\bfrom{S}now{S}on(?:{S})?you{S}(?:will|must|are|shall|should|have{S}to|can)(?:{S}(?:only|always|never|not|no{S}longer|ignore|act|respond|reply|answer|obey))`).
		needs("now"),
	// Hiding the action from the human: "do not tell the user about this".
	injection([]string{"do", "don", "dont", "never"},
		`\b(?:do{S}not|don't|dont|never)(?:{S})?(?:tell|inform|notify|alert|warn){S}(?:the{S})?(?:user|human|operator)s?{S}(?:about|of){S}(?:this|these|it|that)\b`+
			`|\b(?:do{S}not|don't|dont|never)(?:{S})?(?:mention|reveal|disclose){S}(?:this|these|it|that)(?:{S}\w+)?{S}to{S}(?:the{S})?(?:user|human|operator)s?\b`).
		needs("user", "users", "human", "operator", "operators"),
	// "hide this from the user", "without telling the user".
	injection([]string{"hide", "conceal", "without"},
		`\b(?:hide|conceal){S}(?:this|it|that){S}from{S}(?:the{S})?(?:user|human|operator)\b`+
			`|\bwithout{S}(?:the{S})?(?:user|human|operator)(?:'s)?{S}(?:knowing|noticing)\b`+
			`|\bwithout{S}(?:telling|informing|alerting){S}(?:the{S})?(?:user|human|operator)\b`).
		needs("user", "users", "human", "operator", "operators"),
	// "exfiltrate".
	injection([]string{"exfiltrate", "exfiltrates", "exfiltrated", "exfiltrating", "exfiltration"}, `\bexfiltrat\w*`),
	// "send your API keys to ...".
	injection([]string{"send", "sending", "email", "mail", "forward", "upload", "transmit", "leak", "dump", "exfiltrate"},
		`\b(?:send|sending|email|mail|forward|upload|transmit|leak|dump|exfiltrate)`+
			`(?:{S}(?:me|us|over|out|all|the|your|my|our|their|any|of|these|those|its|stored|saved|current|private|secret|aws|openai|stripe|github|ssh|cloud|production|prod|environment|api|access))*`+
			`{S}(?:api(?:{S})?keys?|apikeys?|access(?:{S})?keys?|secret(?:{S})?keys?|private(?:{S})?keys?|ssh(?:{S})?keys?|keys|credentials|creds|passwords?|passwd|secrets|tokens?|auth(?:{S})?tokens?|session(?:{S})?(?:cookies?|tokens?)|cookies|env(?:ironment)?{S}(?:variables|vars|file)|\.env)\b`+
			`[^\n]*?(?:\b(?:to|at|via|into|using)\b|@|https?://)`).
		needs("key", "keys", "apikey", "apikeys", "credentials", "creds", "password", "passwords", "passwd", "secrets",
			"token", "tokens", "cookie", "cookies", "env", "variables", "vars"),
	// "upload ~/.ssh/id_rsa ...".
	injection([]string{"upload", "send", "post", "email", "mail", "forward", "exfiltrate", "transmit", "leak"},
		`\b(?:upload|send|post|email|mail|forward|exfiltrate|transmit|leak)\b[^\n]*?(?:~/\.ssh|\.ssh/|\bid_rsa\b|\bid_ed25519\b|\.aws/credentials|/etc/shadow|/etc/passwd|\.git-credentials|\.netrc|\.env\b)`).
		needs("ssh", "rsa", "ed25519", "aws", "shadow", "passwd", "credentials", "netrc", "env"),
	// "print your system prompt".
	injection([]string{"print", "reveal", "show", "display", "output", "repeat", "tell", "leak", "dump", "disclose", "share", "give", "write", "recite", "what"},
		`\b(?:print|reveal|show|display|output|repeat|tell{S}me|leak|dump|disclose|share|give{S}me|write{S}out|recite|what{S}(?:is|are|was|were))(?:{S}(?:me|us))?{S}(?:your|the)(?:{S}(?:full|entire|complete|original|initial|hidden|secret|exact|verbatim|first|internal))*{S}`+
			`(?:system{S}(?:prompt|message|instructions?)|(?:developer|hidden|initial|original|secret|internal){S}(?:prompt|instructions?|message))\b`).
		needs("prompt", "message", "instruction", "instructions"),
	// "reveal your instructions".
	injection([]string{"print", "reveal", "show", "display", "output", "repeat", "tell", "leak", "dump", "disclose", "recite", "what"},
		`\b(?:print|reveal|show|display|output|repeat|tell{S}me|leak|dump|disclose|recite|what{S}(?:is|are))(?:{S}(?:me|us))?{S}your(?:{S}(?:full|entire|complete|original|initial|hidden|secret|exact))*{S}(?:prompt|instructions)\b`).
		needs("prompt", "instructions"),
	// "repeat the words above".
	injection([]string{"repeat"}, `\brepeat(?:{S}(?:all|of|the))*{S}(?:words|text|everything|lines){S}(?:above|before)\b`).
		needs("above", "before"),
	// "disable your safety filters", "ignore your programming".
	injection([]string{"override", "overriding", "bypass", "bypassing", "disable", "disabling", "circumvent", "circumventing",
		"ignore", "ignoring", "turn", "remove", "removing", "evade", "get", "break"},
		`\b(?:override|overriding|bypass|bypassing|disable|disabling|circumvent|circumventing|ignore|ignoring|turn{S}off|remove|removing|evade|get{S}around|break{S}free{S}(?:of|from))(?:{S}(?:all|any|of))*{S}(?:your|its)(?:{S}(?:own|built-in|builtin|internal|current|existing))*{S}`+
			`(?:(?:safety|content|ethical|moral|security){S}(?:filters?|guidelines|policies|policy|rules|restrictions|protocols|measures|training)|guardrails|safeguards|alignment|programming|ethics|morals|restrictions|limitations|safety{S}(?:training|features))\b`).
		needs("safety", "content", "ethical", "moral", "security", "guardrails", "safeguards", "alignment", "programming",
			"ethics", "morals", "restrictions", "limitations"),
}

// modelWords name a language model; text addressed to one is suspect.
var modelWords = []string{"ai", "llm", "language", "chatbot", "chatbots", "gpt", "chatgpt", "claude", "copilot", "gemini", "bard"}

// roleLine matches fake role markers at the start of a line: "### System"
// headings, and "System: you must ..." followed by instruction-like text.
// "system: linux" in a config value is not a hit.
var roleLine = regexp.MustCompile(expandSep(
	`\A[ \t>*]*(?:#{1,6}[ \t]*(?:system(?:{S}(?:prompt|message|override|instructions?))?|(?:new|updated|override|admin|developer){S}instructions?)[ \t:*]*(?:\n|\z)` +
		`|(?:system|developer|admin|administrator|assistant)(?:{S}(?:prompt|message|override|note))?[ \t*]*:[ \t*\n]*` +
		`(?:you\b|your{S}(?:new|real|true|actual|only)|ignore|disregard|forget|from{S}now{S}on|new{S}instructions?|override|do{S}not|don't|dont|always|never|the{S}user|act\b|respond|reply|pretend|stop|execute|run\b|send|reveal|print|output))`))

// roleWords are the first words of a line that roleLine can match.
var roleWords = keySet("system", "developer", "admin", "administrator", "assistant")
