package store

// For the tests of package store_test.
var (
	OwnConn        = ownConn
	RowLockWaiters = rowLockWaiters
)
