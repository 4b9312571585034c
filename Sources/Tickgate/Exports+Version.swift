import CTickgateShim
import TickgateCore

// Version, status text and the thread's last error (message and store
// failure kind).

@c @implementation
public func tg_version() -> UInt32 {
    UInt32(TG_VERSION_MAJOR) << 16 | UInt32(TG_VERSION_MINOR) << 8 | UInt32(TG_VERSION_PATCH)
}

@c @implementation
public func tg_version_string() -> UnsafePointer<CChar>! {
    tgshim_version_string()
}

@c @implementation
public func tg_status_string(_ status: tg_status) -> UnsafePointer<CChar>! {
    guard let known = Status(rawValue: Int32(bitPattern: status.rawValue)) else {
        return Boundary.cString("unknown status")
    }
    return Boundary.cString(known.text)
}

@c @implementation
public func tg_last_error_message() -> UnsafePointer<CChar>! {
    tgshim_error_get()
}

@c @implementation
public func tg_last_store_failure() -> tg_store_failure {
    tg_store_failure(rawValue: UInt32(bitPattern: tgshim_error_store_failure()))
}
