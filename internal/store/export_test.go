package store

// ListJobsSQL is listJobsSQL, for the plan tests.
var ListJobsSQL = listJobsSQL
