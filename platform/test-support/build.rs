//! Builds the test guest components for `wasm32-wasip2` (see
//! `pilotage-guest-build`): only tests and benchmarks embed them.

fn main() {
    pilotage_guest_build::build(&[
        ("recipe", "recipe.wasm"),
        ("hostile", "hostile.wasm"),
        ("unfit", "unfit.wasm"),
        ("deployer", "deployer.wasm"),
    ]);
}
