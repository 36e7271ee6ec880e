package risk

// RunsCodeLater reports whether a tool call targets something that executes
// later, outside the approval of this call, so a blanket "always allow" for
// it must be refused: shell startup files (.bashrc, .zshrc, .profile,
// .bash_profile, .zprofile, fish's config.fish and conf.d, ...), git hooks
// and git config (core.hooksPath, core.fsmonitor), autostart entries
// (~/.config/autostart, /etc/xdg/autostart, LaunchAgents, LaunchDaemons),
// systemd units, crontabs, and CI configuration (.github/workflows,
// .gitlab-ci.yml, .circleci, Jenkinsfile, .travis.yml, azure-pipelines.yml,
// ...), ~/.gitconfig, and project files that run on build or install
// (Makefile, package.json scripts, setup.py, .vscode/tasks.json,
// .pre-commit-config.yaml, Dockerfile, node_modules/.bin/*). Every
// exec-category tool, and every tool whose name schedules work
// (cron, systemd, launchd, autostart), runs code later by definition.
//
// Every string in args is looked at, values and map keys, at any depth:
// paths, argv elements, command lines. When args are too large or too deep
// to scan completely, RunsCodeLater answers true: what could not be checked
// cannot be blessed forever, and the same holds if the check itself fails.
func RunsCodeLater(tool string, args map[string]any) (later bool) {
	defer func() {
		if recover() != nil {
			later = true
		}
	}()
	info := analyzeTool(tool)
	if info.cat == CategoryExec || info.later {
		return true
	}
	v := codeLaterVisitor{}
	w := newWalker()
	w.walkArgs(&v, args)
	return v.found || w.limited()
}

// codeLaterVisitor stops the walk at the first string naming a target that
// runs code later.
type codeLaterVisitor struct{ found bool }

func (v *codeLaterVisitor) visitString(w *walker, s, _ string, _ bool) {
	p := pathTextOf(normalize(s, false))
	if _, ok := matchPaths(p, codeLaterPatterns); ok {
		v.found, w.stop = true, true
	} else if _, ok := matchPaths(p, buildFilePatterns); ok {
		v.found, w.stop = true, true
	}
}

func (v *codeLaterVisitor) visitEntry(*walker, string, any, bool) {}

func (v *codeLaterVisitor) visitList(*walker, list, string) {}
