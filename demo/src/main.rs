//! The WinOF mlx4 soft reset racing a driver unload, printed as a timeline (the scenario is
//! in the library, `pnp_lifecycle_demo::soft_reset_racing_unload`).

fn main() {
    print!("{}", pnp_lifecycle_demo::soft_reset_racing_unload().text);
}
