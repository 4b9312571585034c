// swift-tools-version:6.0
// SwiftPM build of Tickgate. CMakeLists.txt builds the same targets, each
// from every file of its folder under Sources/, so the two cannot drift.
import PackageDescription

let package = Package(
    name: "Tickgate",
    products: [
        .library(name: "tickgate", type: .dynamic, targets: ["Tickgate"]),
    ],
    targets: [
        // What Swift's Glibc module lacks (timerfd, eventfd, epoll,
        // CLOCK_BOOTTIME), plus the public header for @c @implementation.
        // hiredis is linked by name here; CMakeLists.txt links its static
        // archive into libtickgate.so instead (README: "Redis"). OpenSSL
        // (rediss://) is linked dynamically by both builds.
        .target(name: "CTickgateShim", linkerSettings: [
            .linkedLibrary("hiredis"), .linkedLibrary("ssl"), .linkedLibrary("crypto"),
        ]),
        // The engine: plain Swift, no C API types.
        // Exclusivity checks stay on in every build but release (as in
        // CMakeLists.txt; the build.swift_flags test compares the two).
        .target(name: "TickgateCore", dependencies: ["CTickgateShim"],
                exclude: ["Store/Redis/Scripts", "Numbers/countries.tsv", "Numbers/generate.py"],
                swiftSettings: [
                    .swiftLanguageMode(.v6),
                    .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release)),
                ]),
        // The C boundary: one @c function per header declaration.
        .target(
            name: "Tickgate",
            dependencies: ["TickgateCore", "CTickgateShim"],
            exclude: ["tickgate.map"],
            swiftSettings: [.swiftLanguageMode(.v6), .enableExperimentalFeature("CImplementation")],
            linkerSettings: [.unsafeFlags([
                "-static-stdlib",
                "-Xlinker", "--version-script=Sources/Tickgate/tickgate.map",
            ])]
        ),
        .testTarget(name: "TickgateCoreTests", dependencies: ["TickgateCore"],
                    swiftSettings: [.swiftLanguageMode(.v6)]),
    ]
)
