package worker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/worktree"
)

// runExecPreview prepares the impact preview of a pending exec in a
// worktree (hitl/impact.go): the worktree's state is recorded, the
// worktree copied into a temporary directory, the command run there in
// the same sandbox as the real run (same validation, deny and read-only
// paths, limits and quota) but never with the network, and the diff it
// made to the copy reported with the state. The copy is removed
// afterwards; the worktree and its repository are only read.
func (e *SandboxExecutor) runExecPreview(ctx context.Context, job *client.Job) client.JobResult {
	start := time.Now()
	fail := func(r client.JobResult, format string, args ...any) client.JobResult {
		r.ExitCode, r.Error, r.DurationMS = -1, fmt.Sprintf(format, args...), time.Since(start).Milliseconds()
		return r
	}
	wt, _ := job.Args["worktree"].(string)
	if wt == "" || e.Worktrees == nil {
		return fail(client.JobResult{}, "an impact preview needs a worktree this worker serves")
	}
	im, err := e.Worktrees.BeginImpact(ctx, wt)
	if err != nil {
		return fail(client.JobResult{}, "%v", err)
	}
	defer func() { _ = im.Close() }()
	state := client.JobResult{Commit: im.Before.Head, Tree: im.Before.Tree}
	dir, err := im.CopyOfWorktree(ctx, e.copyLimits())
	if err != nil {
		return fail(state, "%v", err)
	}
	req, opts, err := e.execSetup(ctx, job, dir, wt)
	if err != nil {
		return fail(state, "%v", err)
	}
	req.Network = false // the preview never reaches anything outside the copy
	res, err := sandbox.Run(ctx, req, opts)
	if err != nil {
		return fail(state, "%v", err)
	}
	r := state
	r.ExitCode, r.Stdout, r.Stderr, r.Truncated = res.ExitCode, string(res.Stdout), string(res.Stderr), res.Truncated
	if res.Error != "" {
		// Killed in the copy (timeout, quota): its effect is not known,
		// and the real run would end the same way.
		return fail(r, "the command did not finish in the preview: %s", res.Error)
	}
	diff, _, err := im.Diff(ctx, dir)
	if err != nil {
		return fail(r, "%v", err)
	}
	if len(diff) > maxDiff {
		// A reviewer must see all of what the command changes.
		return fail(r, "the command's diff is %d KiB, over the %d KiB a reviewer can be shown: split the change", len(diff)>>10, maxDiff>>10)
	}
	r.Diff, r.DurationMS = diff, time.Since(start).Milliseconds()
	return r
}

// runPinnedExec runs an approved exec whose approval pinned the worktree
// state its impact preview ran on (job.Pin): refused, running nothing,
// when the worktree is no longer in that state; else run in the worktree,
// reporting the diff it made (computed as the preview's was).
func (e *SandboxExecutor) runPinnedExec(ctx context.Context, job *client.Job, wt string) client.JobResult {
	fail := func(format string, args ...any) client.JobResult {
		return client.JobResult{ExitCode: -1, Error: fmt.Sprintf(format, args...)}
	}
	if e.Worktrees == nil {
		return fail("this worker serves no repositories")
	}
	im, err := e.Worktrees.BeginImpact(ctx, wt)
	if err != nil {
		return fail("%v", err)
	}
	defer func() { _ = im.Close() }()
	if now := im.Before.Pin(); now != job.Pin {
		head, tree, _ := strings.Cut(job.Pin, ":")
		return fail("refused: worktree %s changed since its impact preview (previewed at HEAD %s with files %s, now HEAD %s with files %s): nothing ran; submit the command again to have its effect reviewed",
			wt, short(head), short(tree), short(im.Before.Head), short(im.Before.Tree))
	}
	req, opts, err := e.execSetup(ctx, job, im.Path, wt)
	if err != nil {
		return fail("%v", err)
	}
	res, err := sandbox.Run(ctx, req, opts)
	if err != nil {
		return fail("%v", err)
	}
	r := resultOf(res)
	if diff, _, err := im.Diff(ctx, im.Path); err == nil {
		r.Diff, r.Truncated = capDiff(diff, r.Truncated)
	}
	return r
}

// copyLimits bound the preview's copy as the sandbox's quota bounds the
// run (the host's defaults when no quota is set).
func (e *SandboxExecutor) copyLimits() worktree.CopyLimits {
	l := worktree.CopyLimits{Bytes: e.Options.DiskQuota, Entries: e.Options.InodeQuota}
	if l.Bytes <= 0 {
		l.Bytes = DefaultDiskMB << 20
	}
	if l.Entries <= 0 {
		l.Entries = DefaultInodes
	}
	return l
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
