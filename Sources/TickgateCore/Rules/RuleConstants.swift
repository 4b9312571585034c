/// The numbers the decision's rules are bounded by, written once.
///
/// The Swift rules (this folder) and `Limits` use them; the Redis scripts
/// get them from here too: a script names one `C.NAME`, and
/// `Store/Redis/Scripts/generate.py` writes there the value of the line
/// marked `// lua: NAME`, so no Lua file types one of them again (`build.redis_scripts` fails
/// when the generated scripts are older than this file).
/// Spans are in microseconds, the unit of the Redis store's clock.
public enum RuleConstants {
    /// 365 days: the longest duration, window, quiet reset or ticket.
    public static let yearMicroseconds: Int64 = 31_536_000_000_000  // lua: YEAR
    /// One day: the shortest life of a key that holds a send record.
    public static let dayMicroseconds: Int64 = 86_400_000_000  // lua: DAY
    /// One hour: the pumping guard's short window.
    public static let hourMicroseconds: Int64 = 3_600_000_000  // lua: HOUR
    /// The longest a guarded code may stay uncounted after its send (an
    /// hour: beyond it the hourly signal would count nothing of the last
    /// hour); codes are kept this long past a day.
    public static let longestUnverifiedAfterMicroseconds: Int64 = 3_600_000_000  // lua: LATE
    /// Most cooldown steps in a policy.
    public static let maximumSteps = 8  // lua: MAX_STEPS
    /// Most successful sends a policy's window may count.
    public static let maximumWindowSends = 1_000_000  // lua: MAX_WINDOW_SENDS
    /// Most wrong codes a policy may allow per code (TG_WRONG_CODES_MAX).
    public static let maximumWrongCodes = 1_000  // lua: MAX_WRONG_CODES
    /// A key's count of consecutive sends stops here (Int32's maximum).
    public static let maximumConsecutiveSends = 2_147_483_647  // lua: MAX_CONSECUTIVE
    /// Most windows in one budget (TG_BUDGET_MAX_WINDOWS).
    public static let maximumBudgetWindows = 4  // lua: MAX_BUDGET_WINDOWS
    /// Most sends one budget window may allow (TG_BUDGET_MAX_SENDS).
    public static let maximumBudgetSends = 100_000  // lua: MAX_BUDGET_SENDS
    /// The largest integer every store keeps exactly (2^53 - 1: Lua's
    /// numbers are doubles).
    public static let maximumStoredInteger: Int64 = 9_007_199_254_740_991  // lua: MAXT
}
