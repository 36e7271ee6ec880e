package store

// For the tests of package store_test.
var (
	OwnConn        = ownConn
	RowLockWaiters = rowLockWaiters
)

// SealLockKey is the advisory lock the sealer takes.
const SealLockKey = sealLockKey
