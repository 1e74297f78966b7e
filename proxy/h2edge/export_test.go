package h2edge

// MaxIdleRunners is maxIdleRunners, for the runners' tests.
const MaxIdleRunners = maxIdleRunners

// IdleRunners is how many of s's runners wait for a job.
func IdleRunners(s *Server) int { return int(s.runners.idle.Load()) }
