package activities

// FreeToRepeat says the turn's provider answers the same conversation the
// same way at no cost (the rules model): the workflow need not record the
// turn before its next costly step (workflows/checkpoint.go).
func (r TurnResult) FreeToRepeat() bool { return r.Deterministic }

// FreeToRepeat says the same of a model step's answer (the assessment).
func (r ModelResult[T]) FreeToRepeat() bool { return r.Deterministic }
