package proxy

func (n *Node) adminRoutes() {}
