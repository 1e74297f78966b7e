package h2edge

// MaxIdleRunners is maxIdleRunners, for the runners' tests.
const MaxIdleRunners = maxIdleRunners
