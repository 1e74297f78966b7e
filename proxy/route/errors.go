package route

// Error is a request the contract refuses: the edge answers it 400 with
// Message (docs/CONTRACT.md "Errors"). Messages name the parameter at
// fault; the fixed ones below are the contract's own words.
type Error struct {
	Message string
}

func (e *Error) Error() string { return "invalid request: " + e.Message }

// Messages the contract words itself (docs/CONTRACT.md "Errors").
const (
	msgInvalidAddress = "Invalid address format"
	msgInvalidTxHash  = "Invalid txHash format"
	msgFilterRequired = "tokenId, marketId, or conditionId is required"
)

func invalid(msg string) *Error { return &Error{Message: msg} }

// errInvalidQuery is a query string that does not parse.
var errInvalidQuery = invalid("Invalid query string")
