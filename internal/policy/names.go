package policy

// NamesTool reports whether a rule of the fleet or the agent policy names
// tool: by its exact name or by a glob that matches it. The catch-all "*"
// names no tool. Metrics label only named tools, so an agent cannot fill
// the label set with names no policy knows.
func (s Set) NamesTool(tool string) bool {
	return s.Fleet.namesTool(tool) || s.Agent.namesTool(tool)
}

func (c *Compiled) namesTool(tool string) bool {
	if c == nil {
		return false
	}
	for i := range c.rules {
		if m := c.rules[i].match; m.kind != matchAll && m.matches(tool) {
			return true
		}
	}
	return false
}
