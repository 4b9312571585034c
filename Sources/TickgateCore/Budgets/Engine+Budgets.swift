extension Engine {
    /// Sets (or replaces) the budget `name`; the charges of its keys stay.
    public func setBudget(_ budget: Budget, name: KeyName) throws(TickgateError) {
        let budget = try budget.validated()
        try write(.budget(name), { (store) throws(TickgateError) in try store.save(budget: budget, name: name) }) { state, _ in
            state.budgets.set(budget, name: name)
            state.refusals.dropAll()
        }
    }

    /// The budget `name`, if set.
    public func budget(name: KeyName) throws(TickgateError) -> Budget? {
        try locked.withLock { (state) throws(TickgateError) in
            try state.checkOpen()
            return state.budgets.budgets[name]
        }
    }

    /// What a budget key has used now, in the window that binds it most.
    public func budgetUsage(_ key: BudgetKey) throws(TickgateError) -> Budget.Usage {
        // A budget set through another engine a moment ago may not have
        // reached this one's copies yet: the store has it.
        if store.holdsRules,
           try locked.withLock({ (state) throws(TickgateError) in
               try state.checkOpen()
               return state.budgets.budgets[key.budget] == nil
           }) {
            try refreshSettings()
        }
        let budget = try locked.withLock { (state) throws(TickgateError) -> Budget in
            try state.checkOpen()
            return try state.budgets.rows([key])[0].budget
        }
        var charges = try store.charges(of: key)
        let now = clock.now()
        budget.prune(&charges, at: now)
        return budget.usage(of: charges, at: now)
    }

    /// Drops every charge of a budget key: its sends are free again.
    public func resetBudget(_ key: BudgetKey) throws(TickgateError) {
        try locked.withLock { (state) throws(TickgateError) in
            try state.checkOpen()
            _ = try state.budgets.rows([key])
        }
        try write(nil, { (store) throws(TickgateError) in try store.resetBudget(key) }) { state, _ in
            state.budgets.reset(key)
            state.refusals.noticedBudgets()
        }
    }
}

extension BudgetBook {
    /// Checks the budget keys one send names: at most
    /// `Budget.maximumKeysPerSend`, none twice, and (`definedHere`) every
    /// budget known. A store that holds the rules reads the budgets itself:
    /// then a budget not known here gets a row with no windows.
    func checked(_ keys: [BudgetKey], definedHere: Bool = true) throws(TickgateError) -> [BudgetRow] {
        guard keys.count <= Budget.maximumKeysPerSend else {
            throw TickgateError(.invalidArgument,
                "a send names \(keys.count) budget keys; at most \(Budget.maximumKeysPerSend)")
        }
        for (index, key) in keys.enumerated() where keys[..<index].contains(key) {
            throw TickgateError(.invalidArgument, "\(key.description) is named twice in one send")
        }
        if !definedHere {
            return keys.map { BudgetRow(key: $0, budget: budgets[$0.budget] ?? Budget(windows: [])) }
        }
        return try rows(keys)
    }
}
