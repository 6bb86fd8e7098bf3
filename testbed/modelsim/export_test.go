package modelsim

import "time"

// SetClock makes the TPM limit read the time from now.
func (s *Server) SetClock(now func() time.Time) { s.now = now }

// TriageCategories are the categories an answer rule may set.
var TriageCategories = triageCategories
