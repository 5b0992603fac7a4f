// Package admin is the gateway's administrative REST resources under
// /api/v1: API keys, GET /key, the organization's settings and members,
// credits, BYOK credentials, end users, generations and their feedback,
// activity and analytics, observability destinations, private endpoints,
// workspaces and their budgets, guardrails, and the SCIM configuration;
// and the public API's route table (each route once, with the key kind it
// needs), which the pipeline in package handlers classifies requests by.
// Admin serves a route for a caller the pipeline authenticated.
package admin
