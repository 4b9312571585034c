/// The budgets an engine knows and, with no store, their charges (with a
/// store the charges live in the store, shared by every engine, and this
/// book holds only charges made alone while the store was out of reach).
/// Every way it changes is a method here.
struct BudgetBook {
    private(set) var budgets: [KeyName: Budget] = [:]
    private(set) var charges: [BudgetKey: [Instant]] = [:]

    mutating func set(_ budget: Budget, name: KeyName) { budgets[name] = budget }

    /// Takes `budgets` as the whole set (what a store holds).
    mutating func replaceBudgets(_ budgets: [KeyName: Budget]) { self.budgets = budgets }

    /// Drops every charge of `key`.
    mutating func reset(_ key: BudgetKey) { charges.removeValue(forKey: key) }

    /// Drops the charges that were written to the store.
    mutating func wroteBack(_ written: [BudgetKey: [Instant]]) {
        for (key, moments) in written {
            guard var left = charges[key] else { continue }
            left.removeAll { moments.contains($0) }
            charges[key] = left.isEmpty ? nil : left
        }
    }

    /// The rows of `keys` for a decision, with no charges: each key's
    /// budget must be known.
    func rows(_ keys: [BudgetKey]) throws(TickgateError) -> [BudgetRow] {
        var rows: [BudgetRow] = []
        rows.reserveCapacity(keys.count)
        for key in keys {
            guard let budget = budgets[key.budget] else {
                throw TickgateError(.notFound, "no budget named \"\(key.budget.value)\" (set it with tg_budget_set)")
            }
            rows.append(BudgetRow(key: key, budget: budget, charges: []))
        }
        return rows
    }

    /// `rows` with their charges moved out of the book (so a decision
    /// changes them in place); `store` puts them back.
    mutating func take(_ rows: [BudgetRow]) -> [BudgetRow] {
        var rows = rows
        for index in rows.indices { rows[index].charges = charges.removeValue(forKey: rows[index].key) ?? [] }
        return rows
    }

    /// Writes back what a decision made of the rows.
    mutating func store(_ rows: [BudgetRow]) {
        for row in rows {
            if row.charges.isEmpty {
                charges.removeValue(forKey: row.key)
            } else {
                charges[row.key] = row.charges
            }
        }
    }
}
