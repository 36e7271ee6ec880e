package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/mcp"
)

var _ mcp.Store = (*Store)(nil)

// errStaleMCP is a lost compare-and-set inside the transaction.
var errStaleMCP = errors.New("store: mcp server version is not the expected one")

// errMCPRace is a concurrent writer taking the version being written.
var errMCPRace = errors.New("store: mcp server version taken")

// mcpHead reads name's current version (0: none) and whether it is a
// tombstone, locking nothing: the insert's guard decides.
func mcpHead(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, name string) (version int, deleted bool, err error) {
	err = q.QueryRow(ctx, `SELECT version, document IS NULL FROM mcp_servers WHERE name = $1 ORDER BY version DESC LIMIT 1`, name).
		Scan(&version, &deleted)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: reading mcp server version: %w", err)
	}
	return version, deleted, nil
}

// PutMCPServer implements mcp.Store.
func (s *Store) PutMCPServer(ctx context.Context, srv mcp.Server, actor string, base int, create bool) (mcp.Registration, error) {
	body, err := json.Marshal(srv)
	if err != nil {
		return mcp.Registration{}, fmt.Errorf("store: encoding mcp server: %w", err)
	}
	for range 5 {
		var reg mcp.Registration
		err := s.inTx(ctx, func(tx pgx.Tx) error {
			current, deleted, err := mcpHead(ctx, tx, srv.Name)
			if err != nil {
				return err
			}
			switch {
			case create && !deleted:
				return apperr.Conflict("MCP server %q is already registered; PUT changes it", srv.Name)
			case !create && deleted:
				return apperr.NotFound("no MCP server %q", srv.Name)
			case !create && base != mcp.AnyVersion && base != current:
				return errStaleMCP
			}
			var at time.Time
			err = tx.QueryRow(ctx, `
				INSERT INTO mcp_servers (name, version, document, created_by)
				SELECT $1, $2 + 1, $3, $4
				WHERE (SELECT coalesce(max(version), 0) FROM mcp_servers WHERE name = $1) = $2
				RETURNING created_at`, srv.Name, current, body, actor).Scan(&at)
			if code, _ := pgCode(err); code == uniqueViolation || errors.Is(err, pgx.ErrNoRows) {
				return errMCPRace
			}
			if err != nil {
				return fmt.Errorf("store: writing mcp server: %w", err)
			}
			reg = mcp.Registration{Server: srv, Version: current + 1, UpdatedBy: actor, UpdatedAt: at.UTC()}
			kind := audit.KindMCPServerUpdated
			if create {
				kind = audit.KindMCPServerCreated
			}
			return insertEvents(ctx, tx, mcpEvent(kind, actor, reg))
		})
		switch {
		case errors.Is(err, errStaleMCP):
			return mcp.Registration{}, s.staleMCP(ctx, srv.Name, base)
		case errors.Is(err, errMCPRace):
			if !create && base != mcp.AnyVersion {
				return mcp.Registration{}, s.staleMCP(ctx, srv.Name, base)
			}
			continue
		}
		return reg, err
	}
	return mcp.Registration{}, apperr.Conflict("MCP server %q is being changed concurrently; try again", srv.Name)
}

// DeleteMCPServer implements mcp.Store.
func (s *Store) DeleteMCPServer(ctx context.Context, name, actor string, base int) error {
	for range 5 {
		err := s.inTx(ctx, func(tx pgx.Tx) error {
			current, deleted, err := mcpHead(ctx, tx, name)
			if err != nil {
				return err
			}
			if deleted {
				return apperr.NotFound("no MCP server %q", name)
			}
			if base != mcp.AnyVersion && base != current {
				return errStaleMCP
			}
			tag, err := tx.Exec(ctx, `
				INSERT INTO mcp_servers (name, version, document, created_by)
				SELECT $1, $2 + 1, NULL, $3
				WHERE (SELECT coalesce(max(version), 0) FROM mcp_servers WHERE name = $1) = $2`, name, current, actor)
			if code, _ := pgCode(err); code == uniqueViolation {
				return errMCPRace
			}
			if err != nil {
				return fmt.Errorf("store: deleting mcp server: %w", err)
			}
			if tag.RowsAffected() == 0 {
				return errMCPRace
			}
			return insertEvents(ctx, tx, audit.Event{Kind: audit.KindMCPServerDeleted, Actor: actor,
				Data: map[string]any{"name": name, "version": current + 1}})
		})
		switch {
		case errors.Is(err, errStaleMCP):
			return s.staleMCP(ctx, name, base)
		case errors.Is(err, errMCPRace):
			if base != mcp.AnyVersion {
				return s.staleMCP(ctx, name, base)
			}
			continue
		}
		return err
	}
	return apperr.Conflict("MCP server %q is being changed concurrently; try again", name)
}

// mcpEvent is a registration's audit event; env values are withheld (they
// may be secrets, and the audit trail is exported to auditors).
func mcpEvent(kind audit.Kind, actor string, reg mcp.Registration) audit.Event {
	red := mcp.Redact(reg)
	body, _ := json.Marshal(red.Server)
	var doc map[string]any
	_ = audit.UnmarshalArgs(body, &doc)
	return audit.Event{Kind: kind, Actor: actor,
		Data: map[string]any{"name": reg.Name, "version": reg.Version, "registration": doc}}
}

// staleMCP is the precondition_failed answer to a write based on a version
// that is no longer current.
func (s *Store) staleMCP(ctx context.Context, name string, base int) error {
	current, deleted, err := mcpHead(ctx, s.pool, name)
	if err != nil {
		return err
	}
	if deleted {
		return apperr.NotFound("no MCP server %q", name)
	}
	return &apperr.Error{Code: apperr.CodePrecondition,
		Message: fmt.Sprintf("MCP server %q is at version %d, not %d: it was changed since you read it; read it again and reapply your change", name, current, base),
		Details: map[string]any{"current_version": current}}
}

// MCPServer implements mcp.Store.
func (s *Store) MCPServer(ctx context.Context, name string) (mcp.Registration, error) {
	rows, err := s.pool.Query(ctx, `SELECT version, document, created_by, created_at FROM mcp_servers
		WHERE name = $1 ORDER BY version DESC LIMIT 1`, name)
	if err != nil {
		return mcp.Registration{}, fmt.Errorf("store: reading mcp server: %w", err)
	}
	regs, err := pgx.CollectRows(rows, scanMCP)
	if err != nil {
		return mcp.Registration{}, err
	}
	if len(regs) == 0 || regs[0].Name == "" {
		return mcp.Registration{}, apperr.NotFound("no MCP server %q", name)
	}
	return regs[0], nil
}

// MCPServers implements mcp.Store.
func (s *Store) MCPServers(ctx context.Context) ([]mcp.Registration, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (name) version, document, created_by, created_at FROM mcp_servers
		ORDER BY name, version DESC`)
	if err != nil {
		return nil, fmt.Errorf("store: listing mcp servers: %w", err)
	}
	regs, err := pgx.CollectRows(rows, scanMCP)
	if err != nil {
		return nil, err
	}
	out := make([]mcp.Registration, 0, len(regs))
	for _, r := range regs {
		if r.Name != "" { // not a tombstone
			out = append(out, r)
		}
	}
	return out, nil
}

// scanMCP reads one version; a tombstone has an empty Name.
func scanMCP(r pgx.CollectableRow) (mcp.Registration, error) {
	var reg mcp.Registration
	var body []byte
	if err := r.Scan(&reg.Version, &body, &reg.UpdatedBy, &reg.UpdatedAt); err != nil {
		return reg, fmt.Errorf("store: reading mcp server: %w", err)
	}
	reg.UpdatedAt = reg.UpdatedAt.UTC()
	if body == nil {
		return mcp.Registration{}, nil
	}
	if err := json.Unmarshal(body, &reg.Server); err != nil {
		return reg, fmt.Errorf("store: decoding mcp server: %w", err)
	}
	return reg, nil
}
