// Package reqbody reads request bodies: up to a size limit (Read), as a
// JSON object checked by jsoncheck (ParseObject, ParseText), and field by
// field with typed readers that remember the first error (Fields), each
// string field within its text limit (CheckTextField); and integer query
// parameters within bounds (IntParam).
package reqbody
