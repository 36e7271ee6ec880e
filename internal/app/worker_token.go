package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/httpapi"
)

// The embedded worker's token: a year long, replaced when less than a
// month is left.
const (
	embeddedTokenTTL   = 365 * 24 * time.Hour
	embeddedTokenRenew = 30 * 24 * time.Hour
	embeddedWorkerName = "embedded"
)

// keptToken is what DataDir/worker.token holds.
type keptToken struct {
	ID    string `json:"id"`
	Token string `json:"token"`
}

// embeddedWorkerToken returns the embedded worker's token for targets
// (sorted). It reuses the one kept in the data dir while that is active,
// verifies with this server's key and serves exactly targets; otherwise it
// mints a new one, keeps it (mode 0600) and revokes the one it replaces, so
// restarts never pile up live tokens.
func (a *App) embeddedWorkerToken(ctx context.Context, api *httpapi.Server, signer *auth.Signer, targets []string) (string, error) {
	path := filepath.Join(a.cfg.DataDir, "worker.token")
	var old keptToken
	switch b, err := os.ReadFile(path); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", fmt.Errorf("app: reading the embedded worker's token: %w", err)
	default:
		if err := json.Unmarshal(b, &old); err != nil {
			a.log.Warn("embedded worker: the kept token is unreadable; minting a new one", "err", err)
			old = keptToken{}
		}
	}
	if old.ID != "" {
		info, ok, err := a.Store.WorkerToken(ctx, old.ID)
		if err != nil {
			return "", err
		}
		if !ok || info.Subject != embeddedWorkerName {
			old.ID = "" // not ours to revoke
		} else if p, err := signer.Verify(old.Token, time.Now()); err == nil && p.TokenID == old.ID && info.Active &&
			time.Until(info.ExpiresAt) > embeddedTokenRenew && slices.Equal(sortedCopy(info.Targets), targets) {
			return old.Token, nil
		}
	}
	tok, err := api.IssueWorkerToken(ctx, "system", embeddedWorkerName, targets, embeddedTokenTTL)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(keptToken{ID: tok.ID, Token: tok.Raw})
	if err != nil {
		return "", err
	}
	if err := writeFileAtomic(path, b, 0o600); err != nil {
		return "", fmt.Errorf("app: keeping the embedded worker's token: %w", err)
	}
	if old.ID != "" {
		if err := a.Store.RevokeToken(ctx, old.ID, "system"); err != nil && apperr.CodeOf(err) != apperr.CodeNotFound {
			return "", fmt.Errorf("app: revoking the embedded worker's previous token: %w", err)
		}
	}
	return tok.Raw, nil
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory and a rename, so a crash never leaves half a file.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the rename: nothing there
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
