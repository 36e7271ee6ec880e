package policy

import (
	"fmt"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
)

const (
	// MaxExpressionLength is the longest when condition accepted, in bytes.
	MaxExpressionLength = 4096
	// MaxCost bounds both the estimated worst-case cost of a when condition
	// (checked by Compile) and its actual cost at evaluation (exceeding it
	// fails closed). Cost units are cel-go's: roughly one per operation,
	// plus a tenth per byte for string work.
	MaxCost = 100_000
	// assumedSize is the length assumed for every string, list or map
	// reachable from the variables when estimating a condition's cost.
	assumedSize = 128
)

// celEnv is the one CEL environment every condition compiles in.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	dynMap := cel.MapType(cel.StringType, cel.DynType)
	return cel.NewEnv(
		cel.Variable("args", dynMap),
		cel.Variable("agent", dynMap),
		cel.Variable("risk", dynMap),
		cel.Variable("tool", cel.StringType),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		cel.ParserExpressionSizeLimit(MaxExpressionLength),
	)
})

// compileMu serialises compiles: cel-go's checker races on the shared
// environment's declarations when two compiles run at once (seen under
// -race in cloneWithDecls). Compiling happens once per policy version, so
// the lock costs nothing that matters; evaluation takes no lock.
var compileMu sync.Mutex

// compileCondition parses, type-checks and plans a when condition. The
// error message is meant for the policy author.
func compileCondition(src string) (cel.Program, error) {
	return compileExpression(src, func(t *cel.Type) bool {
		return t.IsExactType(cel.BoolType) || t.IsExactType(cel.DynType)
	}, "a condition must be bool")
}

// compileExpression is compileCondition for an expression whose output
// type passes ok (want names it in the error).
func compileExpression(src string, ok func(*cel.Type) bool, want string) (cel.Program, error) {
	if len(src) > MaxExpressionLength {
		return nil, fmt.Errorf("expression is %d bytes long; the limit is %d", len(src), MaxExpressionLength)
	}
	compileMu.Lock()
	defer compileMu.Unlock()
	env, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	ast, iss := env.Compile(src)
	if iss.Err() != nil {
		return nil, fmt.Errorf("invalid CEL expression: %s", iss.Err())
	}
	if out := ast.OutputType(); !ok(out) {
		return nil, fmt.Errorf("expression has type %s; %s", out, want)
	}
	est, err := env.EstimateCost(ast, sizeEstimator{})
	if err != nil {
		return nil, fmt.Errorf("cannot estimate the expression's cost: %v", err)
	}
	if est.Max > MaxCost {
		return nil, fmt.Errorf("expression is too expensive: estimated worst-case cost %d exceeds %d (assuming arguments of up to %d elements)", est.Max, MaxCost, assumedSize)
	}
	prg, err := env.Program(ast, cel.CostLimit(MaxCost), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, fmt.Errorf("invalid CEL expression: %v", err)
	}
	return prg, nil
}

// sizeEstimator bounds the size of everything reachable from the input
// variables, which are all dyn and so otherwise unbounded.
type sizeEstimator struct{}

func (sizeEstimator) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	if len(n.Path()) > 0 {
		return &cost.SizeEstimate{Min: 0, Max: assumedSize}
	}
	return nil
}

func (sizeEstimator) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

// activation resolves the condition variables for one decision. Each value
// is built on first use, so a decision pays only for the variables its
// conditions read.
type activation struct {
	in    *Input
	args  ref.Val
	agent ref.Val
	risk  ref.Val
}

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	in := a.in
	switch name {
	case "args":
		if a.args == nil {
			args := in.Args
			if args == nil {
				args = map[string]any{}
			}
			a.args = types.NewStringInterfaceMap(argsAdapter{}, args)
		}
		return a.args, true
	case "agent":
		if a.agent == nil {
			a.agent = types.NewStringInterfaceMap(types.DefaultTypeAdapter, map[string]any{
				"id":   in.Agent.ID,
				"name": in.Agent.Name,
			})
		}
		return a.agent, true
	case "risk":
		if a.risk == nil {
			reasons := in.Risk.Reasons
			if reasons == nil {
				reasons = []string{}
			}
			a.risk = types.NewStringInterfaceMap(types.DefaultTypeAdapter, map[string]any{
				"level":     in.Risk.Level,
				"score":     int64(in.Risk.Score),
				"reasons":   reasons,
				"injection": in.Risk.Injection,
			})
		}
		return a.risk, true
	case "tool":
		return types.String(in.Tool), true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }

// eval runs one condition. Any error, or a non-bool result, is returned as
// an error so the caller can fail closed.
func (a *activation) eval(prg cel.Program) (bool, error) {
	out, _, err := prg.Eval(a)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("condition returned %s, not bool", out.Type().TypeName())
	}
	return bool(b), nil
}
