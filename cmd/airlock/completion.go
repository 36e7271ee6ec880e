package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/alecthomas/kong"
)

type completionCmd struct {
	Shell string `arg:"" enum:"bash,zsh" help:"bash or zsh."`
}

// Run prints the completion script. Both scripts ask the binary itself
// (airlock __complete WORDS...) for the candidates, so they follow the
// command tree as it is.
func (c *completionCmd) Run(g *globals) error {
	script := bashCompletion
	if c.Shell == "zsh" {
		script = zshCompletion
	}
	_, err := fmt.Fprint(g.stdout, script)
	return err
}

const bashCompletion = `# airlock bash completion: eval "$(airlock completion bash)"
_airlock() {
  local cur="${COMP_WORDS[COMP_CWORD]}"
  local IFS=$'\n'
  COMPREPLY=($(compgen -W "$(airlock __complete "${COMP_WORDS[@]:1:COMP_CWORD-1}" 2>/dev/null)" -- "$cur"))
}
complete -o default -F _airlock airlock
`

const zshCompletion = `#compdef airlock
# airlock zsh completion: eval "$(airlock completion zsh)" (after compinit)
_airlock() {
  local -a candidates
  candidates=("${(@f)$(airlock __complete "${(@)words[2,CURRENT-1]}" 2>/dev/null)}")
  compadd -a candidates
}
compdef _airlock airlock
`

// completeWord is the hidden first argument the completion scripts call
// the binary with: airlock __complete WORDS... prints what may follow.
const completeWord = "__complete"

// candidates walks the command tree along words and lists what may come
// next: the subcommands and flags of the deepest command reached, and the
// values of a flag that takes one of a few.
func candidates(n *kong.Node, words []string) []string {
	flagValue := (*kong.Flag)(nil)
	for _, w := range words {
		if flagValue != nil {
			flagValue = nil
			continue
		}
		if strings.HasPrefix(w, "-") {
			if f := findFlag(n, strings.TrimLeft(w, "-")); f != nil && !f.IsBool() && !strings.Contains(w, "=") {
				flagValue = f
			}
			continue
		}
		for _, child := range n.Children {
			if child.Name == w && !child.Hidden {
				n = child
				break
			}
		}
	}
	var out []string
	if flagValue != nil {
		if enum := flagValue.Tag.Enum; enum != "" {
			out = append(out, strings.Split(enum, ",")...)
		}
		return out
	}
	for _, child := range n.Children {
		if !child.Hidden {
			out = append(out, child.Name)
		}
	}
	for p := n; p != nil; p = p.Parent {
		for _, f := range p.Flags {
			if !f.Hidden {
				out = append(out, "--"+f.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// findFlag finds a flag of n or of a command above it by name.
func findFlag(n *kong.Node, name string) *kong.Flag {
	for p := n; p != nil; p = p.Parent {
		for _, f := range p.Flags {
			if f.Name == name {
				return f
			}
		}
	}
	return nil
}
