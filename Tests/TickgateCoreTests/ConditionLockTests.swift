import Glibc
import Testing
@testable import TickgateCore

/// `ConditionLock`'s timed waits end at an instant of CLOCK_MONOTONIC (a
/// wall-clock step must not stretch or cut a store call's bounded wait).
/// A condition left on CLOCK_REALTIME would read that instant as one long
/// past and return at once.
@Suite struct ConditionLockTests {
    @Test func aTimedWaitLastsItsSpan() {
        let lock = ConditionLock()
        let started = Poller.boottime()
        lock.withLock { lock.wait(upTo: .milliseconds(50)) }
        let waited = Poller.boottime().since(started)
        #expect(waited >= .milliseconds(45))
        #expect(waited < .milliseconds(2_000))
    }

    @Test func aConditionOfAnotherOwnerWaitsAlike() {
        let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        ConditionLock.initialize(condition)
        defer {
            pthread_cond_destroy(condition)
            pthread_mutex_destroy(mutex)
            condition.deallocate()
            mutex.deallocate()
        }
        let started = Poller.boottime()
        pthread_mutex_lock(mutex)
        ConditionLock.wait(condition, mutex, upTo: .milliseconds(50))
        pthread_mutex_unlock(mutex)
        let waited = Poller.boottime().since(started)
        #expect(waited >= .milliseconds(45))
        #expect(waited < .milliseconds(2_000))
    }
}
