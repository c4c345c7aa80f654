package proxy

// consoleRoutes serves the web console (added with the console itself).
func (n *Node) consoleRoutes() {}
