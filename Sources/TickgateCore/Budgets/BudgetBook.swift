/// The budgets an engine knows and, with no store, their charges (with a
/// store the charges live in the store, shared by every engine).
struct BudgetBook {
    var budgets: [KeyName: Budget] = [:]
    var charges: [BudgetKey: [Instant]] = [:]

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
