package handlers

// maxAdminBody bounds administrative request bodies.
const maxAdminBody = 1 << 20
